#!/usr/bin/env bash
# Session 46 probe 64. Issue 17's step change with a peak the static budgets cannot serve: 8 -> 40 -> 8 req/s (15 s
# each, 840 requests of 1,024 in / 128 out), goodput at TTFT <= 200 ms and TPOT <= 50 ms, for the whole adaptive
# system and for deadline-first admission at each static budget of the issue (512, 1,024, 2,048, 4,096), each on a
# fresh server: the best static setting chosen in hindsight.
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
export PAGODA=$PWD/$P BENCH_TIMEOUT=100
dir=$R/step40; mkdir -p $dir
for c in slo-adaptive-fallback:4096 slo-static:1024 slo-static:2048 slo-static:512 slo-static:4096; do
  env OUT=$dir CONFIGS="$c" SLO_TPOT_MS=45 SCHEDULE=8:15,40:15,8:15 NUM_PROMPTS=840 \
    scripts/device/controller_bench.sh 2>&1 | grep -v -E "^pagoda:|^#" | grep -E "==|goodput|throughput|TTFT|TPOT|fallback:" | tee -a $dir/summary.txt
  save
done
