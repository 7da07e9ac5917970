#!/usr/bin/env bash
# Session 47 probe 66: Nsight Compute (full set, per-instruction source counters) on decode attention alone
# (DecodeStepProfile.AttentionBf16VsFp8Kv, Llama-3-8B heads, batch 1): FP8 KV at 32k and 8k keys, bf16 KV at 32k.
# Where the FP8 kernel's instructions and stalls are (issue 15: its rate at batch 1).
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
export PAGODA_PROFILE=1
PAGODA_PROFILE_CASE="b1 ctx 32000" timeout 120 $T --gtest_filter='DecodeStepProfile.AttentionBf16VsFp8Kv' >$R/plain-32k.txt 2>&1
PAGODA_PROFILE_CASE="b1 ctx 8000" timeout 120 $T --gtest_filter='DecodeStepProfile.AttentionBf16VsFp8Kv' >$R/plain-8k.txt 2>&1
grep "profile" $R/plain-*.txt
save
run() {  # name case kernel-regex
  PAGODA_PROFILE_CASE="$2" timeout 200 ncu --set full --import-source yes --kernel-name-base demangled -k "regex:$3" -s 3 -c 1 \
    -o $R/$1 $T --gtest_filter='DecodeStepProfile.AttentionBf16VsFp8Kv' >$R/$1-run.log 2>&1
  echo "$1 ncu rc=$?"; tail -2 $R/$1-run.log
  ncu --import $R/$1.ncu-rep --page details --print-details all >$R/$1-details.txt 2>&1
  ncu --import $R/$1.ncu-rep --page source --csv --print-source sass 2>/dev/null | xz >$R/$1-sass.csv.xz
  grep -E "Duration|Issue Slots Busy|Eligible Warps|Warp Cycles Per Issued|Executed Instructions  |DRAM Throughput|Achieved Occupancy|Registers Per|Block Limit" $R/$1-details.txt | head -20
  rm -f $R/$1.ncu-rep
  save
}
run fp8-32k "b1 ctx 32000" 'decode_tc_kernel.*bool.1'
run fp8-8k "b1 ctx 8000" 'decode_tc_kernel.*bool.1'
run bf16-32k "b1 ctx 32000" 'decode_tc_kernel.*bool.0'
