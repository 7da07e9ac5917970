#!/usr/bin/env bash
# Session 42 probe 52: issue 16's weighted tenant under the noisy flood with the noisy tenant's prompt_tokens_per_step
# at 256 (the tenants file; default 2,048-token budget), against the 512-token budget in the same call, then the same
# load without the flood; LRU-K + host tier, fair policy (the settings of probe 51).
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
mt="--prefix-len 1024 --random-input-len 128 --random-output-len 64 --ignore-eos"
base="--model tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096 --kv-cache-memory 1536MiB --max-num-seqs 64"
kvs() {  # name, server extras, bench args
  OUT_DIR="$R/kv_$1" PAGODA="$P" PORT=18795 HOST_MEMORY=8GiB SERVE_ARGS="$base $2" POLICIES="lru-k+host@fair" \
    BENCH_ARGS="$3" timeout 150 scripts/kv_policy_bench.sh >"$R/kv_$1.txt" 2>&1
  echo "kv $1 rc=$?: $(tail -1 $R/kv_$1.txt)"; save
}
F="--mt-tenants 24 $mt --num-prompts 400 --request-rate 10"
N="--mt-tenants 24 --mt-noisy-share 0 $mt --num-prompts 320 --request-rate 8"
A="--mt-tenants 1 --mt-noisy-share 0 $mt --num-prompts 60 --request-rate 2"
kvs cap256_flood "" "$F --mt-noisy-prompt-tokens-per-step 256"
kvs b512_flood "--max-num-batched-tokens 512" "$F"
kvs cap256_noflood "" "$N --mt-noisy-prompt-tokens-per-step 256"
