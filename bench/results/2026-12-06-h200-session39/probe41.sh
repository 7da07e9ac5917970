#!/usr/bin/env bash
# Session 39 probe 41: (1) every GPU test, with the quantized embedding lookup (kernels/quant_embedding.h:
# CudaQuantEmbedding.*, CudaQuantModel.* with GGUF tables and --quantize-embeddings w4 / fp8); (2) Llama-3-8B shape
# (dummy weights) W4A16 with and without --quantize-embeddings w4 (and --quantize-lm-head w4): weights on the GPU,
# KV pool, batch-1 decode.
set -u
cd "$(dirname "$0")/.."
source scripts/device/probe_env.sh
GTEST_FILTER='CudaQuantEmbedding.*:Checkpoints/CudaQuantModel.*:Models/CudaModel.*:*PagedAttention*:CudaGraphs.*' timeout 200 $T >$R/gtest-all.log 2>&1; echo "gpu tests rc=$? ok=$(grep -c '^\[       OK' $R/gtest-all.log) failed=$(grep -c '^\[  FAILED' $R/gtest-all.log)"
grep -E "^\[  FAILED" $R/gtest-all.log | head -8
grep -E "CudaQuantEmbedding|embeddings-" $R/gtest-all.log | grep -E "OK|FAILED" | head -12
save
M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096"
lat() {  # name, then extra arguments
  local o=$R/lat_$1; shift
  timeout 120 $P --log-level info bench latency $M --quantization awq --batch-size 1 --max-num-seqs 1 \
    --input-len 128 --output-len 256 --num-iters 2 "$@" --json >$o.json 2>$o.log
  echo "$(basename $o) rc=$?: $(python3 -c "import json; d=json.load(open('$o.json')); print(round(d['decode_tokens_per_second_per_sequence'],1), 'tok/s')" 2>&1 | tail -1) | $(grep -ho 'weights on the GPU: [0-9.]* GiB' $o.log | head -1) | $(grep -ho 'KV cache: [0-9]* blocks x [0-9]* tokens = [0-9]* tokens' $o.log | head -1)"
}
lat awq
lat awq_emb_w4 --quantize-embeddings w4
lat awq_head_emb_w4 --quantize-lm-head w4 --quantize-embeddings w4
save
