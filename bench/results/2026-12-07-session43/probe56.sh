#!/usr/bin/env bash
# Session 43 probe 56: is the first-use cost of kernels (CUDA's lazy module loading) what made some early steps'
# launches take 10-60 ms in probe 55 (tenant-0's first request among them)? The same --log-level debug flood with
# CUDA_MODULE_LOADING=EAGER for the server, whose start-up log says what eager loading costs.
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
printf '#!/usr/bin/env bash\nexec %s --log-level debug "$@"\n' "$PWD/$P" >/tmp/pagoda-debug && chmod +x /tmp/pagoda-debug
mt="--prefix-len 1024 --random-input-len 128 --random-output-len 64 --ignore-eos"
base="--model tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096 --kv-cache-memory 1536MiB --max-num-seqs 64"
C="--mt-noisy-prompt-tokens-per-step 256"
CUDA_MODULE_LOADING=EAGER OUT_DIR="$R/kv_flood_eager" PAGODA=/tmp/pagoda-debug PORT=18795 HOST_MEMORY=8GiB SERVE_ARGS="$base" \
  POLICIES="lru-k+host@fair" BENCH_ARGS="--mt-tenants 24 $mt --num-prompts 400 --request-rate 10 $C" timeout 150 \
  scripts/kv_policy_bench.sh >"$R/kv_flood_eager.txt" 2>&1
echo "kv flood_eager rc=$?: $(tail -1 $R/kv_flood_eager.txt)"; save
grep -E "loaded|GPU memory|captured|serving" $R/kv_flood_eager/serve-*.log | cut -c1-200
