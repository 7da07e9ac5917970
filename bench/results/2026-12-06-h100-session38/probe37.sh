#!/usr/bin/env bash
# Session 38 probe 37: a steady load (SCHEDULE, default 12 req/s for 40 s, 1,024/128) for the best static budgets
# with FCFS and the new controller rule with deadline-first admission: "never below the best static" (issue 17).
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
export OUT=$R PAGODA=$PWD/$P
CONFIGS="${CONFIGS:-slo-adaptive:4096 static:2048 static:4096}" SCHEDULE=${SCHEDULE:-12:40} NUM_PROMPTS=${NUM_PROMPTS:-480} \
  SLO_TPOT_MS=45 BENCH_TIMEOUT=100 scripts/device/controller_bench.sh 2>&1 | grep -v -E "^pagoda:|^#" | tee $R/summary.txt
OUT=${R%/r}; save
