#!/usr/bin/env bash
# Session 47 probe 67: the KV gather with its block ids loaded first and a 32 x 32 -> 64-bit offset a row
# (paged_attention_common.cuh), against the bundle of 8fae197 (.device/device_bundle_old.tar.xz) on the same machine:
# every GPU test (new), decode attention alone (DecodeStepProfile.AttentionBf16VsFp8Kv, both, alternating),
# then batch-1 decode at 8k and 32k with bf16 and FP8 KV end to end (new, then old).
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
mkdir -p old && tar -xJf .device/device_bundle_old.tar.xz -C old
TO=old/device_bundle/bin/test_cuda; PO=old/device_bundle/bin/pagoda
cat old/device_bundle/COMMIT >$R/old-commit.txt
timeout 200 $T --gtest_brief=1 --gtest_filter='PagedAttention*:KvFp8Store*:CudaModel*:CudaGraphs*:CudaQuantModel*:CudaMixedSteps*:KvBlockCopy.*' >$R/gtest-new.log 2>&1; echo "gtest new rc=$? $(grep -E '^\[  (PASSED|FAILED)' $R/gtest-new.log | tr '\n' ' ')"
grep -E "^\[  FAILED" $R/gtest-new.log | head -20
save
export PAGODA_PROFILE=1
for round in 1; do
  for b in new old; do
    bin=$T; [ $b = old ] && bin=$TO
    LD_LIBRARY_PATH=$PWD/$( [ $b = old ] && echo old/ )device_bundle/lib:$LD_LIBRARY_PATH timeout 200 $bin --gtest_filter='DecodeStepProfile.AttentionBf16VsFp8Kv' >$R/profile-$b-$round.txt 2>&1
    echo "== $b round $round"; grep "profile \]" $R/profile-$b-$round.txt
  done
  save
done
unset PAGODA_PROFILE
l31=/tmp/pagoda-llama-3.1-8b
mkdir -p $l31 && cp tests/data/models/llama-3-8b/* $l31/ && cp tests/data/models/llama-3.1-8b/config.json $l31/
for b in new old; do
  bin=$P; [ $b = old ] && bin=$PO
  for c in "8k 8000 8448 2" "32k 32000 32768 1"; do
    set -- $c
    for d in auto fp8; do
      timeout 200 $bin bench latency -m $l31 --load-format dummy --device cuda --kv-cache-dtype $d --batch-size 1 --input-len $2 \
        --output-len 256 --num-iters $4 --max-model-len $3 --json >$R/e2e-$b-$1-$d.json 2>$R/e2e-$b-$1-$d.log
      echo "$b $1 $d rc=$? $(python3 -c "import json; print(round(json.load(open('$R/e2e-$b-$1-$d.json'))['decode_tokens_per_second_per_sequence'], 1))" 2>&1 | tail -1)"
    done
    save
  done
done
