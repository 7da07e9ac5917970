#!/usr/bin/env bash
# Session 43 probe 55: issue 16's flood with --log-level debug (each step's plan and launch times, prompt chunks),
# then the 2.5x longer flood (1,000 prompts at 10/s) with the noisy tenant's kv_cap at 0.4 and 0.25 of the pool
# (--mt-noisy-kv-cap; probe 54's long flood without a cap had tenant-0 queued up to 414 ms for blocks).
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
printf '#!/usr/bin/env bash\nexec %s --log-level debug "$@"\n' "$PWD/$P" >/tmp/pagoda-debug && chmod +x /tmp/pagoda-debug
mt="--prefix-len 1024 --random-input-len 128 --random-output-len 64 --ignore-eos"
base="--model tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096 --kv-cache-memory 1536MiB --max-num-seqs 64"
kvs() {  # name, pagoda binary, bench args, timeout
  OUT_DIR="$R/kv_$1" PAGODA="$2" PORT=18795 HOST_MEMORY=8GiB SERVE_ARGS="$base" POLICIES="lru-k+host@fair" \
    BENCH_ARGS="$3" timeout $4 scripts/kv_policy_bench.sh >"$R/kv_$1.txt" 2>&1
  echo "kv $1 rc=$?: $(tail -1 $R/kv_$1.txt)"; save
}
C="--mt-noisy-prompt-tokens-per-step 256"
kvs flood_debug /tmp/pagoda-debug "--mt-tenants 24 $mt --num-prompts 400 --request-rate 10 $C" 120
kvs flood_long_cap40 /tmp/pagoda-debug "--mt-tenants 24 $mt --num-prompts 1000 --request-rate 10 $C --mt-noisy-kv-cap 0.4" 160
kvs flood_long_cap25 $P "--mt-tenants 24 $mt --num-prompts 1000 --request-rate 10 $C --mt-noisy-kv-cap 0.25" 160
