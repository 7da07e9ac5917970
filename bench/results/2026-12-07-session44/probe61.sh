#!/usr/bin/env bash
# Session 44 probe 61 (what little device time was left): probe 58's first stage, the GPU tests that this session's
# deferred residual norm and session 43's untested code touch, then one W4A16 batch-1 pair with the norm deferred and not.
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
PAGODA_DEFERRED_NORM=1 timeout 130 $T --gtest_filter='QuantGemv.Norm*:QuantGemv.Matches*:CudaQuantModel*:*AsyncSchedulingGpu*:DeviceSampling.*:PlaceholderTokens.*' >$R/gtest.log 2>&1
grep -E "^\[  (PASSED|FAILED) |tests from .* ran" $R/gtest.log | head -16; save
M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096"
for d in 1 0; do
  o=$R/lat_awq_b1_deferred$d
  PAGODA_DEFERRED_NORM=$d timeout 40 $P --log-level info bench latency $M --quantization awq --batch-size 1 --max-num-seqs 1 \
    --input-len 128 --output-len 256 --num-iters 2 --json >$o.json 2>$o.log
  echo "awq batch 1 deferred=$d: $(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['decode_tokens_per_second_per_sequence'], 1))" $o.json 2>&1 | tail -1) tok/s"
  save
done
