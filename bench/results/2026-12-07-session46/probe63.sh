#!/usr/bin/env bash
# Session 46 probe 63. (1) Issue 16 in one call: tenant-0's P99 TTFT under the 1,000-prompt flood (24 tenants, the
# noisy one capped at a quarter of the pool and 256 prompt tokens a step, tenant-0 with kv_share 0.2), the same load
# without the noisy tenant (its 200 of 1,000 prompts taken out: 800 at 8/s), and tenant-0 alone (60 at 2/s), each on a
# fresh server with the same tenants-file settings. (2) Issue 14: W4A16 / W8A16 batch-1 decode with the deferred norm.
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
S="--mt-noisy-prompt-tokens-per-step 256 --mt-noisy-kv-cap 0.25 --mt-weighted-kv-share 0.2"
kv_flood share20_flood "$P" 170 --mt-tenants 24 $MT_ARGS $S --num-prompts 1000 --request-rate 10
kv_flood share20_noflood "$P" 150 --mt-tenants 24 --mt-noisy-share 0 $MT_ARGS $S --num-prompts 800 --request-rate 8
kv_flood share20_alone "$P" 90 --mt-tenants 1 --mt-noisy-share 0 $MT_ARGS $S --num-prompts 60 --request-rate 2
for kind in awq int8; do
  o=$R/lat_$kind
  timeout 70 $P --log-level info bench latency -m tests/data/models/llama-3-8b --load-format dummy --device cuda \
    --max-model-len 4096 --quantization $kind --batch-size 1 --input-len 128 --output-len 256 --num-iters 2 --json >$o.json 2>$o.log
  echo "$kind batch 1: $(python3 -c "import json; print(round(json.load(open('$o.json'))['decode_tokens_per_second_per_sequence'], 1))" 2>&1 | tail -1) tok/s"
  save
done
