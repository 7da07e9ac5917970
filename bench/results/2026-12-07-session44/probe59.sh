#!/usr/bin/env bash
# Session 44 probe 59: session 43's probe 57 after its GPU tests (probe 58 ran them): issue 16's flood at debug level
# (do launches still wait on the device now that the sampler's buffers and the step inputs are sized before serving?
# the debug lines name any growth or graph capture left), and the 1,000-prompt flood with tenant-0's kv_share 0.2
# beside the noisy tenant's kv_cap 0.25.
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
C="--mt-tenants 24 $MT_ARGS --mt-noisy-prompt-tokens-per-step 256"
kv_flood flood_debug "$PAGODA_DEBUG" 120 $C --num-prompts 400 --request-rate 10
grep -E "grow|chunk of|capturing" $R/kv_flood_debug/serve-*.log | head -40
kv_flood flood_long_share20 "$P" 160 $C --num-prompts 1000 --request-rate 10 --mt-noisy-kv-cap 0.25 --mt-weighted-kv-share 0.2
