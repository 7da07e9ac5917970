#!/usr/bin/env bash
# Session 46 probe 65: issue 17's steady load on the H200 (20 req/s for 30 s, 600 requests of 1,024 in / 128 out),
# the whole adaptive system beside deadline-first admission at a static 1,024 (the step change's best static budget).
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
export PAGODA=$PWD/$P BENCH_TIMEOUT=70
dir=$R/steady20; mkdir -p $dir
for c in slo-adaptive-fallback:4096 slo-static:1024; do
  env OUT=$dir CONFIGS="$c" SLO_TPOT_MS=45 SCHEDULE=20:30 NUM_PROMPTS=600 \
    scripts/device/controller_bench.sh 2>&1 | grep -v -E "^pagoda:|^#" | grep -E "==|goodput|throughput|TTFT|TPOT|fallback:" | tee -a $dir/summary.txt
  save
done
