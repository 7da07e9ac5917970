#!/usr/bin/env bash
# Session 40 probe 42: the committed tree (57814e9) as committed: every GPU test, then scripts/device/run.sh kv
# (issue 15's bf16 vs FP8 KV table on the Llama-3.1-8B shape: FP8 KV now wants 4 decode blocks an SM by default).
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
PAGODA_PROFILE=1 timeout 280 $T >$R/gtest-all.log 2>&1
grep -E "^\[  (PASSED|FAILED) |tests from .* ran" $R/gtest-all.log | head -12; save
OUT=$R/kv KV_PPL=1 timeout 300 scripts/device/run.sh kv 2>&1 | tail -14; save
