#!/usr/bin/env bash
# Session 35 probe 20: the converter's stalls: gate-up at 256 / 2,048 tokens without its proxy fence (mode 4), with its
# codes loaded straight to registers (8), both (12); Nsight Compute's per-instruction stall samples at 256 (mode 0).
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
for t in 256 2048; do
  for mode in 0 1 4 8 12; do
    PAGODA_WS_MODE=$mode PAGODA_PROFILE=1 PAGODA_QUANT_GEMM_TABLE=28672:$t timeout 60 $T --gtest_filter='QuantGemm.PrintsTimesOnLlamaShapes' >$R/t${t}_m$mode.log 2>&1
    echo "T=$t mode=$mode: $(grep '^\[ gemm' $R/t${t}_m$mode.log | head -1 | grep -o 'copy + cuBLAS *[0-9.]* us, cuBLAS bf16 *[0-9.]* us\|warp-specialized *[0-9.]* us ( *[0-9.]* TFLOP/s)' | tr '\n' ' ')"
  done
done
save
PAGODA_PROFILE=1 PAGODA_QUANT_GEMM_TABLE=28672:256 timeout 200 ncu --clock-control none --kernel-name regex:quant_gemm_ws --launch-count 1 \
  --section SourceCounters --section WarpStateStats --import-source no -o $R/ws256 \
  $T --gtest_filter=QuantGemm.PrintsTimesOnLlamaShapes >$R/ncu-run.txt 2>&1; echo "ncu rc=$?"
timeout 60 ncu -i $R/ws256.ncu-rep --page source --csv --print-source sass >$R/ws256-source.csv 2>&1; echo "source rc=$? $(wc -c <$R/ws256-source.csv)"
xz -9 $R/ws256-source.csv; rm -f $R/ws256.ncu-rep
save
