#!/usr/bin/env bash
# Session 40 probe 45, everything in one call (device starts were scarce): (1) every GPU test at dcb3e4d (the act-order
# upload and gather, the PDL late-writes test, FP8 KV's 4 decode blocks an SM as committed); (2) W4 act-order decode
# against plain GPTQ W4 (dummy gptq g128, quantization_config.desc_act true / false), batch 1, 128 context; (3) issue
# 15's batch-1 ratios at 8k and 32k as committed (scripts/device/run.sh kv's b1_ctx8k and b1_ctx32k commands).
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
PAGODA_PROFILE=1 timeout 240 $T >$R/gtest-all.log 2>&1
grep -E "^\[  (PASSED|FAILED) |tests from .* ran" $R/gtest-all.log | head -14; save
for d in act plain; do
  mkdir -p /tmp/l3-$d && cp tests/data/models/llama-3-8b/* /tmp/l3-$d/
  python3 - "$d" <<'PY'
import json, sys
d = sys.argv[1]
p = f"/tmp/l3-{d}/config.json"
c = json.load(open(p))
c["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": d == "act"}
json.dump(c, open(p, "w"))
PY
done
for d in act plain act plain; do
  o=$R/lat_${d}_b1_$RANDOM
  timeout 100 $P --log-level info bench latency -m /tmp/l3-$d --load-format dummy --quantization gptq --device cuda \
    --max-model-len 4096 --batch-size 1 --input-len 128 --output-len 256 --num-iters 2 --json >$o.json 2>$o.log
  echo "W4 gptq $d b1: $(python3 -c "import json; print(round(json.load(open('$o.json'))['decode_tokens_per_second_per_sequence'], 1))" 2>&1 | tail -1) tok/s | $(grep -ho 'weights on the GPU: [0-9.]* GiB' $o.log | head -1) $(grep -ho 'as bf16.*' $o.log | head -1)"
done; save
l31=/tmp/pagoda-llama-3.1-8b
mkdir -p $l31 && cp tests/data/models/llama-3-8b/* $l31/ && cp tests/data/models/llama-3.1-8b/config.json $l31/
kv() {
  local name=$1 d=$2; shift 2
  local o=$R/kv_${d}_$name
  timeout 150 $P --log-level info bench latency -m $l31 --load-format dummy --device cuda --kv-cache-dtype $d "$@" --json >$o.json 2>$o.log
  echo "$d $name: $(python3 -c "import json; print(round(json.load(open('$o.json'))['decode_tokens_per_second_per_sequence'], 1))" 2>&1 | tail -1) tok/s"
}
for d in auto fp8; do kv b1_ctx8k $d --batch-size 1 --input-len 8000 --output-len 256 --num-iters 2 --max-model-len 8448; done; save
for d in auto fp8; do kv b1_ctx32k $d --batch-size 1 --input-len 32000 --output-len 256 --num-iters 1 --max-model-len 32768; done; save
