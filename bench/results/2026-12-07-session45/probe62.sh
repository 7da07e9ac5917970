#!/usr/bin/env bash
# Session 45 probe 62. (1) Issue 16's 1,000-prompt flood with tenant-0's kv_share 0.2 beside the noisy tenant's
# kv_cap 0.25 (probe 59's second run), which aborted the server on the bundle of 436c68e ("waiting sequence has
# placeholders": a share claim's victims were admitted again in the plan that preempted them; fixed in 40c49f2).
# (2) Issue 17's steady load (16 req/s for 30 s, 1,024 in / 128 out, goodput at TTFT 200 / TPOT 50 ms) for the whole
# adaptive system beside deadline-first admission at a static 1,024: "never below it on steady load".
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
C="--mt-tenants 24 $MT_ARGS --mt-noisy-prompt-tokens-per-step 256"
kv_flood flood_long_share20 "$P" 170 $C --num-prompts 1000 --request-rate 10 --mt-noisy-kv-cap 0.25 --mt-weighted-kv-share 0.2
grep -h PAGODA_CHECK $R/kv_flood_long_share20/serve-*.log | head -3
export PAGODA=$PWD/$P BENCH_TIMEOUT=70
dir=$R/steady16; mkdir -p $dir
env OUT=$dir CONFIGS="slo-adaptive-fallback:4096 slo-static:1024" SLO_TPOT_MS=45 SCHEDULE=16:30 \
  scripts/device/controller_bench.sh 2>&1 | grep -v -E "^pagoda:|^#" | grep -E "==|goodput|throughput|TTFT|TPOT|fallback:" | tee $dir/summary.txt
save
