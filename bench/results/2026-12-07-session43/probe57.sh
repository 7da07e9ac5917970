#!/usr/bin/env bash
# Session 43 probe 57 (prepared, not run: no device time left). Run the GPU tests first: bf36167, f6d6455 and
# efbaa35 have not run on a GPU. Then: does a step's launch still wait for the device in issue 16's flood (probe 55:
# launches of 10-60 ms early in the run) now that the sampler's buffers (f6d6455) and the step inputs (efbaa35) are
# sized before serving? The flood at --log-level debug, whose lines also say where buffers still grow and where a
# decode graph is captured; then the 1,000-prompt flood with tenant-0's kv_share 0.2 beside the noisy kv_cap 0.25.
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
timeout 240 $T >$R/gtest.log 2>&1
grep -E "^\[  (PASSED|FAILED) |tests from .* ran" $R/gtest.log | head -12; save
C="--mt-tenants 24 $MT_ARGS --mt-noisy-prompt-tokens-per-step 256"
kv_flood flood_debug "$PAGODA_DEBUG" 120 $C --num-prompts 400 --request-rate 10
grep -E "grow|chunk of|capturing" $R/kv_flood_debug/serve-*.log | head -40
kv_flood flood_long_share20 "$P" 160 $C --num-prompts 1000 --request-rate 10 --mt-noisy-kv-cap 0.25 --mt-weighted-kv-share 0.2
