#!/usr/bin/env bash
# Session 43 probe 57 (prepared, not run: no device time left): does a step's launch still wait for the device
# in issue 16's flood (probe 55: launches of 10-60 ms early in the run) now that the sampler's buffers (f6d6455)
# and the step inputs (efbaa35) are sized before serving? The same --log-level debug flood, whose debug lines
# also say where the step inputs, the sampler's buffers or the GPU workspace still grow and where a decode graph
# is captured. Run the GPU tests first: bf36167, f6d6455 and efbaa35 have not run on a GPU.
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
printf '#!/usr/bin/env bash\nexec %s --log-level debug "$@"\n' "$PWD/$P" >/tmp/pagoda-debug && chmod +x /tmp/pagoda-debug
mt="--prefix-len 1024 --random-input-len 128 --random-output-len 64 --ignore-eos"
base="--model tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096 --kv-cache-memory 1536MiB --max-num-seqs 64"
OUT_DIR="$R/kv_flood_grow" PAGODA=/tmp/pagoda-debug PORT=18795 HOST_MEMORY=8GiB SERVE_ARGS="$base" \
  POLICIES="lru-k+host@fair" BENCH_ARGS="--mt-tenants 24 $mt --num-prompts 240 --request-rate 10 --mt-noisy-prompt-tokens-per-step 256" \
  timeout 100 scripts/kv_policy_bench.sh >"$R/kv_flood_grow.txt" 2>&1
echo "rc=$?"; save
grep -E "grow|chunk of|capturing" $R/kv_flood_grow/serve-*.log | head -60
