#!/usr/bin/env bash
# Session 41 probe 48, one call (device starts are scarce), each stage saved as it ends:
# (1) every GPU test (the act-order upload, the norms' output order, the gather's early launch, the PDL late-writes
#     test, FP8 KV's 4 decode blocks an SM as committed);
# (2) W4 act-order decode (dummy gptq g128, quantization_config.desc_act true) against plain GPTQ W4 (desc_act false),
#     batch 1, 128 context: act order as in session 40 (every input gathered: PAGODA_ACT_ORDER_IN_NORM=0
#     PAGODA_GATHER_EARLY_LAUNCH=0), + the norms' order (EARLY_LAUNCH=0), + the early launch (the default), plain;
# (3) issue 15's batch-1 FP8/bf16 KV ratios at 8k and 32k as committed (scripts/device/run.sh kv's b1_ctx8k and
#     b1_ctx32k commands, Llama-3.1-8B shape, bf16 weights);
# (4) (2) again; (5) the decode attention kernel alone at 128 to 32k keys, PAGODA_DECODE_BLOCKS_PER_SM 2, 3, 4, 6.
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
tps() { python3 -c "import json; print(round(json.load(open('$1'))['decode_tokens_per_second_per_sequence'], 1))" 2>&1 | tail -1; }
act_round() {
  for v in act:0:0 act:1:0 act:1:1 plain:1:1; do
    IFS=: read -r d n e <<<"$v"; o=$R/lat_${d}_norm${n}_early${e}_r$1
    PAGODA_ACT_ORDER_IN_NORM=$n PAGODA_GATHER_EARLY_LAUNCH=$e timeout 100 $P --log-level info bench latency -m /tmp/l3-$d \
      --load-format dummy --quantization gptq --device cuda --max-model-len 4096 --batch-size 1 --input-len 128 \
      --output-len 256 --num-iters 2 --json >$o.json 2>$o.log
    echo "W4 gptq $d in-norm=$n early=$e r$1: $(tps $o.json) tok/s | $(grep -ho 'weights on the GPU: [0-9.]* GiB' $o.log | head -1) $(grep -ho 'as bf16.*' $o.log | head -1)"
  done; save
}
act_round 1
l31=/tmp/pagoda-llama-3.1-8b
mkdir -p $l31 && cp tests/data/models/llama-3-8b/* $l31/ && cp tests/data/models/llama-3.1-8b/config.json $l31/
kv() {
  local name=$1 d=$2; shift 2
  local o=$R/kv_${d}_$name
  timeout 150 $P --log-level info bench latency -m $l31 --load-format dummy --device cuda --kv-cache-dtype $d "$@" --json >$o.json 2>$o.log
  echo "$d $name: $(tps $o.json) tok/s"
}
for d in auto fp8; do kv b1_ctx8k $d --batch-size 1 --input-len 8000 --output-len 256 --num-iters 2 --max-model-len 8448; done; save
for d in auto fp8; do kv b1_ctx32k $d --batch-size 1 --input-len 32000 --output-len 256 --num-iters 1 --max-model-len 32768; done; save
act_round 2
for e in 2 3 4 6; do
  PAGODA_DECODE_BLOCKS_PER_SM=$e PAGODA_PROFILE=1 PAGODA_PROFILE_CASE="b1 ctx" timeout 60 $T --gtest_filter='DecodeStepProfile.AttentionBf16VsFp8Kv' \
    >$R/profile_bpsm$e.log 2>&1
  echo "[blocks per SM $e]"; grep -E "^\[ profile \]" $R/profile_bpsm$e.log
done; save
