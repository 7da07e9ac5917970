#!/usr/bin/env bash
# Session 36 probe 27: Nsight Compute on the warp-specialized GEMM (gate-up 28,672 x 4,096, 256 tokens, 4-bit g128;
# params loaded into registers a chunk ahead, PAGODA_WS_PARAMS_RING=0 = the committed form): where the converter waits.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/o}
tar -xJf device_bundle.tar.xz
scripts/device/run.sh unpack-only >/dev/null 2>&1
R=$OUT/r; mkdir -p $R
save() { tar -cJf $OUT/results.tar.xz -C $OUT r; }
export LD_LIBRARY_PATH="$PWD/device_bundle/lib:$(python3 -c 'import nvidia.cublas,os;print(os.path.join(list(nvidia.cublas.__path__)[0],"lib"))' 2>/dev/null):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
T=device_bundle/bin/test_cuda
export PAGODA_WS_PARAMS_RING=0 PAGODA_PROFILE=1 PAGODA_QUANT_GEMM_TABLE=28672:256
timeout 200 ncu --set full --import-source yes -k regex:quant_gemm_ws_kernel -s 2 -c 1 -o $R/ws $T --gtest_filter='QuantGemm.PrintsTimesOnLlamaShapes' >$R/ncu-run.log 2>&1
echo "ncu rc=$?"; tail -3 $R/ncu-run.log
ncu --import $R/ws.ncu-rep --page details --print-details all >$R/ws-details.txt 2>&1
ncu --import $R/ws.ncu-rep --page source --csv --print-source sass >$R/ws-source-sass.csv 2>&1
grep -E "Duration|Issue Slots Busy|Eligible Warps|No Eligible|Stall|Warp Cycles Per Issued|Throughput|Bank" $R/ws-details.txt | head -60
save
