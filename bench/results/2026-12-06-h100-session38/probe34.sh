#!/usr/bin/env bash
# Session 38 probe 34: every GPU test at the committed code (#18's worker strands, submit_all), then the graph-replay
# test 40 times (it failed once in 270 before LLM::generate submitted every request at once, ae91f14).
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
PAGODA_PROFILE=1 timeout 300 $T --gtest_filter='-*DiagRunToRun*' >$R/gpu-tests.log 2>&1
echo "gpu tests: rc=$? ok=$(grep -c '^\[       OK' $R/gpu-tests.log) failed=$(grep -E '^\[  FAILED  \].*ms\)' $R/gpu-tests.log | sort -u | wc -l)"
grep -E '^\[  FAILED  \].*ms\)' $R/gpu-tests.log | head -20
xz -9 -k $R/gpu-tests.log; rm -f $R/gpu-tests.log; save
timeout 150 $T --gtest_filter='Checkpoints/CudaQuantModel.GraphReplay*' --gtest_repeat=40 >$R/graph-replay-x40.log 2>&1
echo "graph replay x40: rc=$? ok=$(grep -c '^\[       OK' $R/graph-replay-x40.log) failed=$(grep -c '^\[  FAILED  \] Checkpoints.*ms)' $R/graph-replay-x40.log)"
xz -9 $R/graph-replay-x40.log; save
