#!/usr/bin/env bash
# Session 39 probe 39: decode attention's first chunks loaded before the PDL wait (PAGODA_DECODE_EARLY_LOADS=1,
# the change) against after it (=0, as before), same binary. Every GPU test (the change on), the kernels alone
# (DecodeStepProfile) both ways, then batch-1 decode end to end at 128 context (Llama-3-8B shape) for awq, none
# and fp8, the two settings alternating twice.
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
timeout 300 $T >$R/gtest-all.log 2>&1; echo "gpu tests rc=$? ok=$(grep -c '^\[       OK' $R/gtest-all.log) failed=$(grep -c '^\[  FAILED' $R/gtest-all.log)"
grep -E "^\[  FAILED" $R/gtest-all.log | head -10
save
for el in 1 0; do
  PAGODA_DECODE_EARLY_LOADS=$el PAGODA_PROFILE=1 timeout 90 $T --gtest_filter='DecodeStepProfile.*' >$R/profile_el$el.log 2>&1
  echo "early loads=$el:"; grep -E "profile \]" $R/profile_el$el.log | grep -E "attention|b1|b64|b256" | head -20
done
save
M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096"
lat() {  # kind early round
  local o=$R/lat_$1_el$2_r$3
  PAGODA_DECODE_EARLY_LOADS=$2 timeout 90 $P --log-level info bench latency $M --quantization $1 --batch-size 1 --max-num-seqs 1 \
    --input-len 128 --output-len 256 --num-iters 2 --json >$o.json 2>$o.log
  echo "$1 early=$2 round $3 rc=$?: $(python3 -c "import json; d=json.load(open('$o.json')); print(round(d['decode_tokens_per_second_per_sequence'],1), 'tok/s')" 2>&1 | tail -1)"
}
for r in 1 2; do for kind in awq none fp8; do for el in 1 0; do lat $kind $el $r; done; done; save; done
