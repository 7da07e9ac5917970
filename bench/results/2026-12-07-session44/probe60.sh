#!/usr/bin/env bash
# Session 44 probe 60: issue 17's step-change load (8 -> 32 -> 8 req/s of 1,024 in / 128 out, goodput at TTFT 200 ms
# and TPOT 50 ms) for the whole adaptive system, the controller with deadline-first admission and the FP8 precision
# fallback (slo-adaptive-fallback, new in controller_bench.sh), beside the controller alone and deadline-first
# admission at a static 1,024 (session 38's best static setting, probe 38): the same call, so the same machine.
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
export PAGODA=$PWD/$P BENCH_TIMEOUT=100
dir=$R/step45; mkdir -p $dir
env OUT=$dir CONFIGS="slo-adaptive-fallback:4096 slo-static:1024 slo-adaptive:1024" SLO_TPOT_MS=45 \
  scripts/device/controller_bench.sh 2>&1 | grep -v -E "^pagoda:|^#" | tee $dir/summary.txt
save
