#!/usr/bin/env bash
# Session 41 probe 50 (what device time was left): the rewritten gather and ordered norm (indices before the PDL
# wait, 8 columns a thread): their tests, then W4 act-order decode (defaults), plain GPTQ, and act order with every
# input gathered (PAGODA_ACT_ORDER_IN_NORM=0 PAGODA_GATHER_EARLY_LAUNCH=0), batch 1, 128 context.
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
timeout 60 $T --gtest_filter='ElementwiseKernels.*:QuantGemv.ActOrder*:CudaActOrder.*:*CudaQuantModel*' >$R/gtest.log 2>&1
grep -E "^\[  (PASSED|FAILED) |tests from .* ran" $R/gtest.log | head -8; save
gptq_copies /tmp/l3
for v in act:1:1 plain:1:1 act:0:0; do
  IFS=: read -r d n e <<<"$v"; o=$R/lat_${d}_norm${n}_early${e}
  PAGODA_ACT_ORDER_IN_NORM=$n PAGODA_GATHER_EARLY_LAUNCH=$e timeout 60 $P --log-level info bench latency -m /tmp/l3-$d \
    --load-format dummy --quantization gptq --device cuda --max-model-len 4096 --batch-size 1 --input-len 128 \
    --output-len 256 --num-iters 1 --json >$o.json 2>$o.log
  echo "W4 gptq $d in-norm=$n early=$e: $(python3 -c "import json; print(round(json.load(open('$o.json'))['decode_tokens_per_second_per_sequence'], 1))" 2>&1 | tail -1) tok/s"
  save
done
