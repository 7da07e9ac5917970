#!/usr/bin/env bash
# Session 34 probe 15: every GPU test at the final defaults (data unpacked; the 74 s float64 GEMM test, passed in
# probe 13 at fast accumulation, left out), then batch-1 decode at the new decode target of 2 blocks an SM.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/o}
tar -xJf device_bundle.tar.xz
scripts/device/run.sh unpack-only >/dev/null 2>&1
R=$OUT/r; mkdir -p $R
save() { tar -cJf $OUT/results.tar.xz -C $OUT r; }
export LD_LIBRARY_PATH="$PWD/device_bundle/lib:$(python3 -c 'import nvidia.cublas,os;print(os.path.join(list(nvidia.cublas.__path__)[0],"lib"))' 2>/dev/null):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PAGODA_TEST_DATA_DIR="$PWD/tests/data"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/device.txt
P=device_bundle/bin/pagoda
timeout 200 device_bundle/bin/test_cuda --gtest_filter='-Fp8Linear.CublasLtGemmMatchesFloat64' >$R/gtest_all.log 2>&1
echo "GPU tests rc=$?"; grep -E "^\[  FAILED|^\[  PASSED|tests ran" $R/gtest_all.log | head -20
save
tok=/tmp/l31-tok; mkdir -p $tok && cp -L tests/data/models/llama-3-8b/* $tok/ && cp tests/data/models/llama-3.1-8b/config.json $tok/
for ctx in 128 8000; do
  for d in auto fp8; do
    timeout 60 $P bench latency -m $tok --load-format dummy --device cuda --kv-cache-dtype $d --batch-size 1 \
      --input-len $ctx --output-len 256 --num-iters 2 --max-model-len 32768 --json >$R/b1_${ctx}_$d.json 2>/dev/null
    echo "ctx $ctx kv=$d rc=$?: $(python3 -c "import json; d=json.load(open('$R/b1_${ctx}_$d.json')); print(round(d['decode_tokens_per_second_per_sequence'],1), 'tok/s')" 2>&1 | tail -1)"
  done
done
save
