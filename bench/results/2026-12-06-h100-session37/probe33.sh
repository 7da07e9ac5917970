#!/usr/bin/env bash
# Session 37 probe 33: with LLM::generate submitting every request at once (ae91f14), is each mode (eager/graph x
# async/sync) the same from run to run, and graph replay the same as eager? A diagnostic test (not committed), 15
# repetitions on every quantized checkpoint, then the committed graph-replay test, 30 repetitions.
set -u
cd "$(dirname "$0")/.."   # the repository root, with the script in .device/
source scripts/device/probe_env.sh
timeout 200 $T --gtest_filter='Checkpoints/CudaQuantModel.GraphReplay*' --gtest_repeat=30 >$R/graph-replay-x30.log 2>&1
echo "graph replay x30: rc=$? ok=$(grep -c '^\[       OK' $R/graph-replay-x30.log) failed=$(grep -c '^\[  FAILED  \] Checkpoints.*ms)' $R/graph-replay-x30.log)"
xz -9 $R/graph-replay-x30.log; save
timeout 240 $T --gtest_filter='Checkpoints/CudaQuantModel.DiagRunToRun/*' --gtest_repeat=15 >$R/diag.log 2>&1
echo "diag x15: rc=$? lines=$(grep -c '\[ diag \]' $R/diag.log)"
grep "\[ diag \]" $R/diag.log | grep -v " 0 of 20" | sort | uniq -c | head -30
grep -E "^\[  FAILED  \].*ms\)" $R/diag.log | sort | uniq -c | head
xz -9 $R/diag.log
save
