#!/usr/bin/env bash
# Session 38 probe 36: issue 17's step-change load (8 -> 32 -> 8 req/s, 1,024/128, goodput at TTFT <= 200 ms and
# TPOT <= 50 ms) for the static budgets with FCFS, the best deadline-first static budget of the simulation, and
# the new controller rule with deadline-first admission (slo-adaptive, --slo-tpot-ms 45), one server after another.
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
export OUT=$R PAGODA=$PWD/$P
CONFIGS="${CONFIGS:-slo-adaptive:4096 static:2048 static:4096 static:1024 slo-static:1024}" SLO_TPOT_MS=45 \
  BENCH_TIMEOUT=100 scripts/device/controller_bench.sh 2>&1 | grep -v -E "^pagoda:|^#" | tee $R/summary.txt
rm -f $R/*.json.tmp
OUT=${R%/r}; save
