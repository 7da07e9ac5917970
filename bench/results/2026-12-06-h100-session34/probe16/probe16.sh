#!/usr/bin/env bash
# Session 34 probe 16 (H200 wanted): batch-1 decode, Llama-3.1-8B shape, bf16 vs FP8 KV, at 8k with the new decode
# target (2 blocks an SM) and the old (4), and at 32k with the new.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/o}
tar -xJf device_bundle.tar.xz
scripts/device/run.sh unpack-only >/dev/null 2>&1
R=$OUT/r; mkdir -p $R
save() { tar -cJf $OUT/results.tar.xz -C $OUT r; }
export LD_LIBRARY_PATH="$PWD/device_bundle/lib:$(python3 -c 'import nvidia.cublas,os;print(os.path.join(list(nvidia.cublas.__path__)[0],"lib"))' 2>/dev/null):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/device.txt
P=device_bundle/bin/pagoda
tok=/tmp/l31-tok; mkdir -p $tok && cp -L tests/data/models/llama-3-8b/* $tok/ && cp tests/data/models/llama-3.1-8b/config.json $tok/
run() {  # knobs ctx kv
  local tag=$(echo "${1:-default}" | tr ' =' '_-')
  env $1 timeout 60 $P bench latency -m $tok --load-format dummy --device cuda --kv-cache-dtype $3 --batch-size 1 \
    --input-len $2 --output-len 256 --num-iters 2 --max-model-len 32768 --json >$R/b1_$2_$3_$tag.json 2>/dev/null
  echo "${1:-default} ctx $2 kv=$3 rc=$?: $(python3 -c "import json; d=json.load(open('$R/b1_$2_$3_$tag.json')); print(round(d['decode_tokens_per_second_per_sequence'],1), 'tok/s')" 2>&1 | tail -1)"
  save
}
for d in auto fp8; do run "" 8000 $d; done
for d in auto fp8; do run "PAGODA_DECODE_BLOCKS_PER_SM=4" 8000 $d; done
for d in auto fp8; do run "" 32000 $d; done
