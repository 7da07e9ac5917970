#!/usr/bin/env bash
# Session 43 probe 53: late planning (sched/late_planning.h; PAGODA_LATE_PLANNING=0 plans as soon as a step is
# launched, as before) A/B in one call: the GPU tests of async scheduling, the engine scenarios and the act-order
# kernels (the 70,000-row gather test of bbe9414 too); bf16 offline 1,000 x 128/128 and batch-1 decode both ways;
# issue 16's weighted tenant under the noisy flood (prompt_tokens_per_step 256, LRU-K + host tier, fair) both ways;
# then the act-order knobs one by one (PAGODA_ACT_ORDER_IN_NORM, PAGODA_GATHER_EARLY_LAUNCH) at W4 batch 1.
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
timeout 150 $T --gtest_filter='ElementwiseKernels.*:QuantGemv.ActOrder*:CudaActOrder.*:AsyncSchedulingGpu.*:*EngineScenarios*:PlaceholderTokens.*' >$R/gtest.log 2>&1
grep -E "^\[  (PASSED|FAILED) |tests from .* ran" $R/gtest.log | head -12; save
M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096"
tp() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(round(d.get('output_tokens_per_second', 0)), 'out tok/s;', round(d.get('decode_tokens_per_second_per_sequence', 0), 1), 'b1 tok/s')" "$1" 2>&1 | tail -1; }
for late in 1 0 1 0; do
  o=$R/offline_late$late
  PAGODA_LATE_PLANNING=$late timeout 90 $P --log-level info bench throughput $M --num-prompts 1000 --input-len 128 \
    --output-len 128 --max-num-seqs 256 --json >$o.json 2>$o.log
  echo "offline bf16 late=$late: $(tp $o.json)"; save
done
for late in 1 0; do
  o=$R/b1_late$late
  PAGODA_LATE_PLANNING=$late timeout 60 $P --log-level info bench latency $M --batch-size 1 --input-len 128 --output-len 256 \
    --num-iters 2 --json >$o.json 2>$o.log
  echo "batch-1 bf16 late=$late: $(tp $o.json)"; save
done
mt="--prefix-len 1024 --random-input-len 128 --random-output-len 64 --ignore-eos"
base="--model tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096 --kv-cache-memory 1536MiB --max-num-seqs 64"
kvs() {  # name, late planning 0/1, bench args
  PAGODA_LATE_PLANNING=$2 OUT_DIR="$R/kv_$1" PAGODA="$P" PORT=18795 HOST_MEMORY=8GiB SERVE_ARGS="$base" POLICIES="lru-k+host@fair" \
    BENCH_ARGS="$3" timeout 150 scripts/kv_policy_bench.sh >"$R/kv_$1.txt" 2>&1
  echo "kv $1 rc=$?: $(tail -1 $R/kv_$1.txt)"; save
}
F="--mt-tenants 24 $mt --num-prompts 400 --request-rate 10 --mt-noisy-prompt-tokens-per-step 256"
kvs flood_late1 1 "$F"
kvs flood_late0 0 "$F"
gptq_copies /tmp/l3
for v in act:1:1 act:0:1 act:1:0 plain:1:1; do
  IFS=: read -r d n e <<<"$v"; o=$R/lat_${d}_norm${n}_early${e}
  PAGODA_ACT_ORDER_IN_NORM=$n PAGODA_GATHER_EARLY_LAUNCH=$e timeout 60 $P --log-level info bench latency -m /tmp/l3-$d \
    --load-format dummy --quantization gptq --device cuda --max-model-len 4096 --batch-size 1 --input-len 128 \
    --output-len 256 --num-iters 2 --json >$o.json 2>$o.log
  echo "W4 gptq $d in-norm=$n early=$e: $(tp $o.json)"; save
done
