#!/usr/bin/env bash
# Session 30 probe 7 (H200): the FP8 figures after the QKV store and residual-norm changes, for PERFORMANCE and pagoda plan.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/o}
[ -f device_bundle.tar.xz ] && { rm -rf device_bundle; tar -xJf device_bundle.tar.xz; }
scripts/device/run.sh unpack-only >/dev/null 2>&1
export LD_LIBRARY_PATH="$PWD/device_bundle/lib:$(python3 -c 'import nvidia.cublas,os;print(os.path.join(list(nvidia.cublas.__path__)[0],"lib"))' 2>/dev/null):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096"
P=device_bundle/bin/pagoda
for q in fp8 none; do
  $P bench latency $M --quantization $q --batch-size 1 --input-len 1024 --output-len 1 --num-iters 5 --json >$OUT/ttft_$q.json 2>/dev/null
  echo "ttft1024 $q $(python3 -c "import json; d=json.load(open('$OUT/ttft_$q.json')); print(round(1e3*d['ttft_seconds']['median'],2), 'ms')" 2>&1 | tail -1)"
done
for kv in fp8 auto; do
  PAGODA_CUDA_STEP_TIMING=1 $P --log-level info bench throughput $M --quantization fp8 --kv-cache-dtype $kv --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --json >$OUT/tp_fp8_kv$kv.json 2>$OUT/tp_fp8_kv$kv.log
  echo "offline fp8 kv $kv: $(python3 -c "import json; print(round(json.load(open('$OUT/tp_fp8_kv$kv.json'))['output_tokens_per_second']))" 2>&1|tail -1) $(grep -o 'GPU [0-9.]* ms each' $OUT/tp_fp8_kv$kv.log | tail -1)"
done
