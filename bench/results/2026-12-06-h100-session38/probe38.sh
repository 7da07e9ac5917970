#!/usr/bin/env bash
# Session 38 probe 38: the controller's second rule (each in-time request kept on the target's pace now, ba9ae79)
# under issue 17's 8 -> 32 -> 8 req/s step, at --slo-tpot-ms 45, beside deadline-first admission at a static
# 1,024 and FCFS at 2,048 (probe 36's best two); then a steady 20 req/s for 30 s (near the H100's saturation, about
# 25 req/s) for the controller at 45 and the static 2,048 and 4,096 with FCFS.
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
export PAGODA=$PWD/$P BENCH_TIMEOUT=100
bench() {  # folder, then the environment for controller_bench.sh
  local dir=$R/$1; shift
  mkdir -p $dir
  env OUT=$dir "$@" scripts/device/controller_bench.sh 2>&1 | grep -v -E "^pagoda:|^#" | tee $dir/summary.txt
  save
}
bench step45 CONFIGS="slo-adaptive:4096 slo-static:1024 static:2048" SLO_TPOT_MS=45
bench steady20 CONFIGS="slo-adaptive:4096 static:2048 static:4096" SLO_TPOT_MS=45 SCHEDULE=20:30 NUM_PROMPTS=600
