#!/usr/bin/env bash
# Session 40 probe 43 (issue 15): decode attention's grid for FP8 KV at 8k and 32k context. The kernel alone
# (DecodeStepProfile.AttentionBf16VsFp8Kv, batch 1) under PAGODA_DECODE_BLOCKS_PER_SM 1 to 6 and
# PAGODA_DECODE_LONG_SPAN 256, then FP8 KV decode end to end at 8k (Llama-3.1-8B shape, bf16 weights) for 1 to 3.
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
i=0
for e in "PAGODA_DECODE_BLOCKS_PER_SM=1" "PAGODA_DECODE_BLOCKS_PER_SM=2" "PAGODA_DECODE_BLOCKS_PER_SM=3" \
    "PAGODA_DECODE_BLOCKS_PER_SM=4" "PAGODA_DECODE_BLOCKS_PER_SM=6" \
    "PAGODA_DECODE_BLOCKS_PER_SM=2 PAGODA_DECODE_LONG_SPAN=256" "PAGODA_DECODE_BLOCKS_PER_SM=4 PAGODA_DECODE_LONG_SPAN=256" \
    "PAGODA_DECODE_BLOCKS_PER_SM=1 PAGODA_DECODE_LONG_SPAN=512"; do
  i=$((i + 1))
  env $e PAGODA_PROFILE=1 PAGODA_PROFILE_CASE="b1 ctx" timeout 60 $T --gtest_filter='DecodeStepProfile.AttentionBf16VsFp8Kv' \
    >$R/profile_$i.log 2>&1
  echo "[$e]"; grep -E "^\[ profile \]" $R/profile_$i.log
done; save
l31=/tmp/pagoda-llama-3.1-8b
mkdir -p $l31 && cp tests/data/models/llama-3-8b/* $l31/ && cp tests/data/models/llama-3.1-8b/config.json $l31/
for b in 1 2 3; do
  o=$R/kv_fp8_b1_ctx8k_bpsm$b
  PAGODA_DECODE_BLOCKS_PER_SM=$b timeout 120 $P --log-level info bench latency -m $l31 --load-format dummy --device cuda \
    --kv-cache-dtype fp8 --batch-size 1 --input-len 8000 --output-len 256 --num-iters 2 --max-model-len 8448 --json >$o.json 2>$o.log
  echo "fp8 8k bpsm $b: $(python3 -c "import json; print(round(json.load(open('$o.json'))['decode_tokens_per_second_per_sequence'], 1))" 2>&1 | tail -1)"
done; save
