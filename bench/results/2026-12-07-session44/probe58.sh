#!/usr/bin/env bash
# Session 44 probe 58. (1) The GPU tests of what changed: bf36167, f6d6455, efbaa35, fcbf960 and 6d22720 of session 43 have not run
# on a GPU, and the deferred residual norm of this session is new (QuantGemv.NormBetweenTwoGemvs*; the model tests
# of the quantized checkpoints run it). (2) W4A16 decode at batch 1 (twice) and W8A16 at batch 1 with the norm
# deferred to the GEMVs (PAGODA_DEFERRED_NORM=1; off by default until this call) and as before (0), alternating. (3) Issue 17's step
# change (8 -> 32 -> 8 req/s, 1,024 in / 128 out, goodput at TTFT 200 / TPOT 50 ms) for the whole adaptive system
# (controller, deadline-first admission, FP8 fallback watching first tokens: slo-adaptive-fallback) beside
# deadline-first admission at a static 1,024 (session 38's best static setting).
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
# The GPU tests the untested code touches first (the model tests of the quantized checkpoints through the deferred norm).
PAGODA_DEFERRED_NORM=1 timeout 150 $T --gtest_filter='QuantGemv.*:CudaQuantModel*:*AsyncSchedulingGpu*:DeviceSampling.*:*EngineScenarios*:PlaceholderTokens.*:CudaSampling.*:PrecisionFallbackGpu.*:CudaGraphs.*' >$R/gtest.log 2>&1
grep -E "^\[  (PASSED|FAILED) |tests from .* ran" $R/gtest.log | head -16; save
M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096"
tp() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(round(d.get('decode_tokens_per_second_per_sequence', 0), 1), 'tok/s a sequence')" "$1" 2>&1 | tail -1; }
for v in awq:1:1 int8:1:1 awq:1:2; do
  IFS=: read -r kind b round <<<"$v"
  for d in 1 0; do
    o=$R/lat_${kind}_b${b}_deferred${d}_r$round
    PAGODA_DEFERRED_NORM=$d timeout 50 $P --log-level info bench latency $M --quantization $kind --batch-size $b \
      --max-num-seqs $b --input-len 128 --output-len 256 --num-iters 2 --json >$o.json 2>$o.log
    echo "$kind batch $b deferred=$d round $round: $(tp $o.json)"
  done
  save
done
export PAGODA=$PWD/$P BENCH_TIMEOUT=90
dir=$R/step45; mkdir -p $dir
env OUT=$dir CONFIGS="slo-adaptive-fallback:4096 slo-static:1024" SLO_TPOT_MS=45 \
  scripts/device/controller_bench.sh 2>&1 | grep -v -E "^pagoda:|^#" | tee $dir/summary.txt
save
