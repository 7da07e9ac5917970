#!/usr/bin/env bash
# Session 41 probe 49: (1) the decode attention tests that compare FP8 KV with bf16 KV, now over the same spans
# (PagedAttentionParams::decode_blocks_per_sm); (2) Nsight Compute's GPU time per kernel (no PDL overlap) over 4
# decode steps of W4 GPTQ act-order against plain GPTQ (dummy, g128, batch 1, 128-token prompt): where act order's
# 13% (probe 48) goes.
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
timeout 120 $T --gtest_filter='*PagedAttention*' >$R/gtest-attention.log 2>&1
grep -E "^\[  (PASSED|FAILED) |tests from .* ran" $R/gtest-attention.log | head -8; save
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
for d in act plain; do
  timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base --log-file $R/kernels_$d.csv \
    $P bench latency -m /tmp/l3-$d --load-format dummy --quantization gptq --device cuda --max-model-len 4096 \
    --batch-size 1 --max-num-seqs 1 --input-len 128 --output-len 5 --num-iters 1 --num-iters-warmup 0 >$R/kernels_$d.log 2>&1
  echo "ncu $d rc=$?"
  python3 scripts/device/kernel_table.py $R/kernels_$d.csv 4 >$R/kernels_$d.txt 2>&1; head -24 $R/kernels_$d.txt; save
done
