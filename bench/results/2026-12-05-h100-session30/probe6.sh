#!/usr/bin/env bash
# Session 30 probe 6: Ops::linear_add_rms_norm (FP8: the O / down sums scaled by the residual norm) against 7a8c215.
#   probe6.sh tests -> GPU tests, new timings, ncu of a b256 FP8 decode step; probe6.sh -> base then new timings
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/o}
[ -f device_bundle.tar.xz ] && { rm -rf device_bundle; tar -xJf device_bundle.tar.xz; }
[ -f out/base.tar.xz ] && { rm -rf base; tar -xJf out/base.tar.xz; }
scripts/device/run.sh unpack-only >/dev/null 2>&1
export LD_LIBRARY_PATH="$PWD/device_bundle/lib:$PWD/base/lib:$(python3 -c 'import nvidia.cublas,os;print(os.path.join(list(nvidia.cublas.__path__)[0],"lib"))' 2>/dev/null):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PAGODA_TEST_DATA_DIR="$PWD/tests/data"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
if [ "${1:-}" = tests ]; then
  timeout 300 device_bundle/bin/test_cuda >$OUT/gtest.log 2>&1; echo "gtest rc=$?"
  grep -E "^\[  FAILED|^\[  PASSED" $OUT/gtest.log | head -20
fi
M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096"
lat() { python3 -c "import json; d=json.load(open('$1')); print(round(1e3*d['ttft_seconds']['median'],2))" 2>&1 | tail -1; }
tp() { python3 -c "import json; print(round(json.load(open('$1'))['output_tokens_per_second']))" 2>&1|tail -1; }
[ "${1:-}" = tests ] || for P in base/bin/pagoda-base device_bundle/bin/pagoda; do
  [ -x $P ] || continue
  $P bench latency $M --quantization fp8 --batch-size 1 --input-len 1024 --output-len 1 --num-iters 5 --json >$OUT/t.json 2>/dev/null; a=$(lat $OUT/t.json)
  PAGODA_CUDA_STEP_TIMING=1 $P --log-level info bench throughput $M --quantization fp8 --kv-cache-dtype fp8 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --json >$OUT/t.json 2>$OUT/t.log; f=$(tp $OUT/t.json); fg=$(grep -o 'GPU [0-9.]* ms each' $OUT/t.log | tail -1)
  PAGODA_CUDA_STEP_TIMING=1 $P --log-level info bench throughput $M --quantization fp8 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --json >$OUT/t.json 2>$OUT/t.log; g=$(tp $OUT/t.json); gg=$(grep -o 'GPU [0-9.]* ms each' $OUT/t.log | tail -1)
  echo "$(date +%T) $P: ttft1024 fp8 $a ms | offline fp8+kv8 $f ($fg) fp8 $g ($gg)"
done
if [ "${1:-}" = tests ]; then
  for n in 8 24; do
    timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
      device_bundle/bin/pagoda bench latency $M --enforce-eager --quantization fp8 --batch-size 256 --max-num-seqs 256 --input-len 128 --output-len $n --num-iters 1 --num-iters-warmup 0 \
      >$OUT/ncu-fp8-b256-out$n.txt 2>&1; echo "ncu out$n rc=$?"
  done
  python3 .device/ncu_per_step.py $OUT/ncu-fp8-b256-out8.txt $OUT/ncu-fp8-b256-out24.txt 16 | tee $OUT/ncu-fp8-b256-decode-step.txt | head -30
  xz -9 $OUT/ncu-fp8-b256-out*.txt
fi
