#!/usr/bin/env bash
# Session 39 probe 40: issue 15's batch-1 long-context ratios (Llama-3.1-8B shape, bf16 weights) with decode
# attention's early loads on (the change) and off, bf16 and FP8 KV, in one call: `scripts/device/run.sh kv`'s
# b1_ctx8k and b1_ctx32k commands.
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
l31=/tmp/pagoda-llama-3.1-8b
mkdir -p $l31 && cp tests/data/models/llama-3-8b/* $l31/ && cp tests/data/models/llama-3.1-8b/config.json $l31/
M="-m $l31 --load-format dummy --device cuda"
kv() {  # case early dtype, then the arguments
  local name=$1 el=$2 d=$3; shift 3
  local o=$R/kv_${d}_${name}_el$el
  PAGODA_DECODE_EARLY_LOADS=$el timeout 200 $P --log-level info bench latency $M --kv-cache-dtype $d "$@" --json >$o.json 2>$o.log
  echo "$d $name early=$el rc=$? $(python3 -c "import json; d=json.load(open('$o.json')); print(round(d['decode_tokens_per_second_per_sequence'], 1), 'tok/s per sequence')" 2>&1 | tail -1)"
}
for el in 1 0; do for d in auto fp8; do
  kv b1_ctx8k $el $d --batch-size 1 --input-len 8000 --output-len 256 --num-iters 2 --max-model-len 8448
done; done; save
for el in 1 0; do for d in auto fp8; do
  kv b1_ctx32k $el $d --batch-size 1 --input-len 32000 --output-len 256 --num-iters 1 --max-model-len 32768
done; done; save
