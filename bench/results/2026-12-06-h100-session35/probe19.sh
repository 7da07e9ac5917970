#!/usr/bin/env bash
# Session 35 probe 19: the warp-specialized GEMM, second form (x copied by the consumers, codes in the converter's own
# ring, values written 4 chunks ahead of the products): correctness, gate-up by mode, the whole table.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/o}
tar -xJf device_bundle.tar.xz
scripts/device/run.sh unpack-only >/dev/null 2>&1
R=$OUT/r; mkdir -p $R
save() { tar -cJf $OUT/results.tar.xz -C $OUT r; }
export LD_LIBRARY_PATH="$PWD/device_bundle/lib:$(python3 -c 'import nvidia.cublas,os;print(os.path.join(list(nvidia.cublas.__path__)[0],"lib"))' 2>/dev/null):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/device.txt
T=device_bundle/bin/test_cuda
timeout 120 $T --gtest_filter='QuantGemmWarp*' >$R/gtest-correct.log 2>&1; echo "correctness rc=$?"
grep -E "^\[  (FAILED|PASSED) |Failure" $R/gtest-correct.log | head -10
for t in 256 2048; do
  for mode in 0 1 2 3; do
    PAGODA_WS_MODE=$mode PAGODA_PROFILE=1 PAGODA_QUANT_GEMM_TABLE=28672:$t timeout 60 $T --gtest_filter='QuantGemm.PrintsTimesOnLlamaShapes' >$R/t${t}_m$mode.log 2>&1
    echo "T=$t mode=$mode: $(grep '^\[ gemm' $R/t${t}_m$mode.log | head -1 | grep -o 'warp-specialized *[0-9.]* us ( *[0-9.]* TFLOP/s)')"
  done
done
save
