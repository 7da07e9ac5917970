#!/usr/bin/env bash
# Session 35 probe 18: where the warp-specialized GEMM's time goes: gate-up at 256 and 2,048 tokens with the converter's
# conversion skipped (PAGODA_WS_MODE=1), x's copies skipped (2), both (3); then Nsight Compute (full set) at 2,048.
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
for t in 256 2048; do
  for mode in 0 1 2 3; do
    PAGODA_WS_MODE=$mode PAGODA_PROFILE=1 PAGODA_QUANT_GEMM_TABLE=28672:$t timeout 60 $T --gtest_filter='QuantGemm.PrintsTimesOnLlamaShapes' >$R/t${t}_m$mode.log 2>&1
    echo "T=$t mode=$mode: $(grep '^\[ gemm' $R/t${t}_m$mode.log | head -1 | grep -o 'warp-specialized *[0-9.]* us ( *[0-9.]* TFLOP/s)')"
  done
done
save
PAGODA_PROFILE=1 PAGODA_QUANT_GEMM_TABLE=28672:2048 timeout 240 ncu --clock-control none --kernel-name regex:quant_gemm_ws --launch-count 1 --set full \
  $T --gtest_filter=QuantGemm.PrintsTimesOnLlamaShapes >$R/ncu-ws-full.txt 2>&1; echo "ncu rc=$?"
grep -E "Duration|Throughput|Pipe|Stall|stall|Issue|Eligible|Active Warps|Registers|Shared Memory|L2 Hit|Bank|One or More|No Eligible|Warp Cycles" $R/ncu-ws-full.txt | head -60
save
