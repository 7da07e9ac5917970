#!/usr/bin/env bash
# Session 37 probe 32: is CudaQuantModel.GraphReplayGivesTheSameTokensAsEager flaky at the committed code?
# Every checkpoint's case, 30 repetitions.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/o}
tar -xJf device_bundle.tar.xz
scripts/device/run.sh unpack-only >/dev/null 2>&1
R=$OUT/r; mkdir -p $R
save() { tar -cJf $OUT/results.tar.xz -C $OUT r; }
export LD_LIBRARY_PATH="$PWD/device_bundle/lib:$(python3 -c 'import nvidia.cublas,os;print(os.path.join(list(nvidia.cublas.__path__)[0],"lib"))' 2>/dev/null):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/device.txt
cat device_bundle/COMMIT
T=device_bundle/bin/test_cuda
timeout 400 $T --gtest_filter='Checkpoints/CudaQuantModel.GraphReplay*' --gtest_repeat=30 >$R/graph-replay-x30.log 2>&1
echo "rc=$? ok=$(grep -c '^\[       OK' $R/graph-replay-x30.log) failed=$(grep -c '^\[  FAILED  \] Checkpoints' $R/graph-replay-x30.log)"
grep '^\[  FAILED  \] Checkpoints' $R/graph-replay-x30.log | sort | uniq -c | head
xz -9 $R/graph-replay-x30.log
save
