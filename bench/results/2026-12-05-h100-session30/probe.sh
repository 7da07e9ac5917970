#!/usr/bin/env bash
# Session 30 probe 5: qkv_rope_store head groups / qkv_rope_store_fp8 a warp per head against main (out/base.tar.xz).
#   probe5.sh tests  -> GPU tests, then the timings of the new binary; probe5.sh -> the base binary's, then the new's
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
lat() { python3 -c "import json; d=json.load(open('$1')); print(round(1e3*d['ttft_seconds']['median'],2) if '$2'=='ttft' else round(d['decode_tokens_per_second_per_sequence'],1))" 2>&1 | tail -1; }
for P in base/bin/pagoda-base device_bundle/bin/pagoda; do
  [ -x $P ] || continue
  $P bench latency $M --quantization fp8 --batch-size 1 --input-len 1024 --output-len 1 --num-iters 5 --json >$OUT/t.json 2>/dev/null; a=$(lat $OUT/t.json ttft)
  $P bench latency $M --batch-size 1 --input-len 1024 --output-len 1 --num-iters 5 --json >$OUT/t.json 2>/dev/null; c=$(lat $OUT/t.json ttft)
  $P bench latency $M --quantization fp8 --batch-size 1 --input-len 128 --output-len 256 --num-iters 3 --json >$OUT/t.json 2>/dev/null; d=$(lat $OUT/t.json dec)
  $P bench latency $M --quantization fp8 --kv-cache-dtype fp8 --batch-size 1 --input-len 128 --output-len 256 --num-iters 3 --json >$OUT/t.json 2>/dev/null; e=$(lat $OUT/t.json dec)
  $P bench throughput $M --quantization fp8 --kv-cache-dtype fp8 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --json >$OUT/t.json 2>/dev/null
  f=$(python3 -c "import json; print(round(json.load(open('$OUT/t.json'))['output_tokens_per_second']))" 2>&1|tail -1)
  $P bench throughput $M --quantization fp8 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --json >$OUT/t.json 2>/dev/null
  g=$(python3 -c "import json; print(round(json.load(open('$OUT/t.json'))['output_tokens_per_second']))" 2>&1|tail -1)
  echo "$(date +%T) $P: ttft1024 fp8 $a ms bf16 $c ms | b1 fp8 $d fp8+kv8 $e tok/s | offline fp8+kv8 $f fp8 $g"
done
if [ "${1:-}" = tests ]; then
for kv in auto fp8; do
timeout 150 ncu --clock-control none --kernel-name regex:qkv_rope --metrics gpu__time_duration.sum --print-summary per-kernel \
  device_bundle/bin/pagoda bench latency $M --enforce-eager --quantization fp8 --kv-cache-dtype $kv --batch-size 16 --max-num-seqs 16 --input-len 128 --output-len 2 --num-iters 1 --num-iters-warmup 0 \
  >$OUT/ncu-$kv.txt 2>&1; echo "ncu $kv rc=$?"; grep -E "qkv_rope|gpu__time" $OUT/ncu-$kv.txt | head -8
done
fi
