#!/usr/bin/env bash
# Session 43 probe 54: issue 16's weighted tenant under the noisy flood (prompt_tokens_per_step 256, LRU-K + host
# tier, fair; late planning on, the default) with --log-level debug, whose per-step lines say which prompt chunks
# each step computed; then runs 2.5x as long (1,000 prompts at 10/s; 800 at 8/s without the noisy tenant; tenant-0
# alone, 200 at 2/s), so that tenant-0's P99 rests on some 200 requests instead of 84.
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
kvs flood_long $P "--mt-tenants 24 $mt --num-prompts 1000 --request-rate 10 $C" 160
kvs noflood_long $P "--mt-tenants 24 --mt-noisy-share 0 $mt --num-prompts 800 --request-rate 8 $C" 160
kvs alone_long $P "--mt-tenants 1 --mt-noisy-share 0 $mt --num-prompts 200 --request-rate 2 $C" 150
