#!/usr/bin/env bash
# Session 42 probe 51: probe 50 (the rewritten gather and ordered norm: their tests, then W4 act order against plain
# GPTQ at batch 1) with the input order read by the few-token GEMV (PAGODA_ORDER_IN_GEMV) on and off, then issue 16's weighted tenant under the noisy flood with --long-prefill-token-threshold 512
# --max-long-partial-prefills 1, with the same load without the flood (the 24 tenants and the periodic one, no noisy
# tenant: 320 prompts at 8/s, the flood's 80 of 400 taken out) and tenant-0 alone; then the 512-token budget with and
# without the flood, and the threshold alone; all with LRU-K + host tier and the fair policy.
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
timeout 120 $T --gtest_filter='ElementwiseKernels.*:QuantGemv.*:CudaActOrder.*:*CudaQuantModel*:CudaOpsLinear.*' >$R/gtest.log 2>&1
grep -E "^\[  (PASSED|FAILED) |tests from .* ran" $R/gtest.log | head -8; save
gptq_copies /tmp/l3
for v in act:1:1:1 act:1:1:0 act:0:1:1 plain:1:1:1; do
  IFS=: read -r d n e f <<<"$v"; o=$R/lat_${d}_norm${n}_early${e}_gemv${f}
  PAGODA_ACT_ORDER_IN_NORM=$n PAGODA_GATHER_EARLY_LAUNCH=$e PAGODA_ORDER_IN_GEMV=$f timeout 60 $P --log-level info bench latency -m /tmp/l3-$d \
    --load-format dummy --quantization gptq --device cuda --max-model-len 4096 --batch-size 1 --input-len 128 \
    --output-len 256 --num-iters 2 --json >$o.json 2>$o.log
  echo "W4 gptq $d in-norm=$n early=$e in-gemv=$f: $(python3 -c "import json; print(round(json.load(open('$o.json'))['decode_tokens_per_second_per_sequence'], 1))" 2>&1 | tail -1) tok/s"
  save
done
mt="--prefix-len 1024 --random-input-len 128 --random-output-len 64 --ignore-eos"
base="--model tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096 --kv-cache-memory 1536MiB --max-num-seqs 64"
kvs() {  # name, server extras, bench args
  OUT_DIR="$R/kv_$1" PAGODA="$P" PORT=18795 HOST_MEMORY=8GiB SERVE_ARGS="$base $2" POLICIES="lru-k+host@fair" \
    BENCH_ARGS="$3" timeout 150 scripts/kv_policy_bench.sh >"$R/kv_$1.txt" 2>&1
  echo "kv $1 rc=$?: $(tail -1 $R/kv_$1.txt)"; save
}
L="--long-prefill-token-threshold 512 --max-long-partial-prefills 1"
F="--mt-tenants 24 $mt --num-prompts 400 --request-rate 10"
N="--mt-tenants 24 --mt-noisy-share 0 $mt --num-prompts 320 --request-rate 8"
A="--mt-tenants 1 --mt-noisy-share 0 $mt --num-prompts 60 --request-rate 2"
kvs long1_flood "$L" "$F"
kvs long1_noflood "$L" "$N"
kvs long1_alone "$L" "$A"
kvs b512_flood "--max-num-batched-tokens 512" "$F"
kvs b512_noflood "--max-num-batched-tokens 512" "$N"
kvs thr512_flood "--long-prefill-token-threshold 512" "$F"
