#!/usr/bin/env bash
# Session 33 probe 11: everything in one call (carry out/both_bundle.tar.xz and .device), most wanted first,
# results saved after each section into $OUT/results.tar.xz.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/o}
tar -xJf out/both_bundle.tar.xz
scripts/device/run.sh unpack-only >/dev/null 2>&1
R=$OUT/r; mkdir -p $R
save() { tar -cJf $OUT/results.tar.xz -C $OUT r; }
export LD_LIBRARY_PATH="$PWD/device_bundle/lib:$(python3 -c 'import nvidia.cublas,os;print(os.path.join(list(nvidia.cublas.__path__)[0],"lib"))' 2>/dev/null):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PAGODA_TEST_DATA_DIR="$PWD/tests/data"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/device.txt
cat device_bundle/COMMIT | tee -a $R/device.txt
T=device_bundle/bin/test_cuda
P=device_bundle/bin/pagoda
# 1. FP8 GEMM: error beyond rounding and TFLOP/s, with and without fast accumulation.
for fa in 1 0; do
  PAGODA_FP8_FAST_ACCUM=$fa timeout 60 $T --gtest_filter='Fp8Linear.CublasLtGemmMatchesFloat64' >$R/gemm_err_fa$fa.log 2>&1
  echo "fast_accum=$fa gemm test rc=$? $(grep -o 'cuBLASLt N [0-9]* K [0-9]* T [0-9]*: .*= [0-9.e-]*' $R/gemm_err_fa$fa.log | awk '{print $3"x"$5"x"$7":"$NF}' | tr '\n' ' ')"
  PAGODA_PROFILE=1 PAGODA_FP8_FAST_ACCUM=$fa timeout 60 $T --gtest_filter='Fp8Linear.PrintsBandwidthOnLlamaShapes' >$R/gemm_speed_fa$fa.log 2>&1
  grep -E "cublasLt T=( 256|1024)" $R/gemm_speed_fa$fa.log | sed "s/^/fa=$fa /"
done
save
# 2. The FP8 tests with both settings on (the norm's FP8 output must match quantize_fp8_rows bit for bit).
PAGODA_FP8_FAST_ACCUM=1 PAGODA_FP8_NORM_QUANT=1 timeout 120 $T --gtest_filter='*Fp8*:*fp8*:*FP8*' >$R/gtest_fp8.log 2>&1
echo "FP8 GPU tests (both on) rc=$?"; grep -E "^\[  FAILED|^\[  PASSED|tests ran" $R/gtest_fp8.log | head
save
# 3. Decode attention alone under the span knobs.
for knobs in "" "PAGODA_DECODE_LONG_SPAN=256" "PAGODA_DECODE_LONG_SPAN=512" "PAGODA_DECODE_LONG_SPAN=64 PAGODA_DECODE_BLOCKS_PER_SM=8" \
             "PAGODA_DECODE_FP8_MANY=0"; do
  tag=$(echo "${knobs:-default}" | tr ' =' '_-')
  env $knobs PAGODA_PROFILE=1 PAGODA_PROFILE_CASE="b1" timeout 60 $T --gtest_filter='DecodeStepProfile.AttentionBf16VsFp8Kv' >$R/attn_$tag.log 2>&1
  echo "== attention ${knobs:-default} rc=$?"; grep "\[ profile \]" $R/attn_$tag.log | sed 's/\[ profile \] //'
done
save
# 4. Whole model: the trained FP8 checkpoint's perplexity and greedy ids under the four settings.
for cfg in 00 01 10 11; do
  fa=${cfg:0:1}; nq=${cfg:1:1}
  ppl=$(PAGODA_FP8_FAST_ACCUM=$fa PAGODA_FP8_NORM_QUANT=$nq timeout 60 $P eval perplexity --device cuda \
        --model tests/data/models/quant/ct-fp8-dynamic --tokenizer tests/data/models/quant/tinystories-656k \
        --text-file tests/data/text/tinystories_valid_part1.txt --ctx-size 512 --chunks 60 --json 2>/dev/null | tail -1)
  PAGODA_FP8_FAST_ACCUM=$fa PAGODA_FP8_NORM_QUANT=$nq timeout 60 $P generate --device cuda \
    -m tests/data/models/quant/ct-fp8-dynamic --tokenizer tests/data/models/quant/tinystories-656k --max-tokens 64 \
    --temperature 0 --json -p "Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine with her dog" \
    >$R/gen_$cfg.json 2>/dev/null
  echo "fa=$fa nq=$nq perplexity $ppl; greedy md5 $(python3 -c "import json,hashlib; print(hashlib.md5(str(json.load(open('$R/gen_$cfg.json'))['output_ids']).encode()).hexdigest()[:12])" 2>&1 | tail -1)"
done
save
# 5. Llama-3-8B shape FP8: TTFT 1,024 and offline 1,000 x 128/128 with FP8 KV, settings 00 / 10 / 11.
M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096"
for cfg in 00 10 11; do
  fa=${cfg:0:1}; nq=${cfg:1:1}
  PAGODA_FP8_FAST_ACCUM=$fa PAGODA_FP8_NORM_QUANT=$nq timeout 60 $P bench latency $M --quantization fp8 --batch-size 1 --input-len 1024 --output-len 1 --num-iters 5 --json >$R/ttft_$cfg.json 2>/dev/null
  echo "ttft1024 fp8 fa=$fa nq=$nq $(python3 -c "import json; d=json.load(open('$R/ttft_$cfg.json')); print(round(1e3*d['ttft_seconds']['median'],2), 'ms')" 2>&1 | tail -1)"
  PAGODA_FP8_FAST_ACCUM=$fa PAGODA_FP8_NORM_QUANT=$nq PAGODA_CUDA_STEP_TIMING=1 timeout 100 $P --log-level info bench throughput $M --quantization fp8 --kv-cache-dtype fp8 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --json >$R/tp_$cfg.json 2>$R/tp_$cfg.log
  echo "offline fp8+fp8kv fa=$fa nq=$nq: $(python3 -c "import json; print(round(json.load(open('$R/tp_$cfg.json'))['output_tokens_per_second']))" 2>&1|tail -1) $(grep -o 'GPU [0-9.]* ms each' $R/tp_$cfg.log | tail -1)"
  save
done
# 6. Batch-1 decode at 8k, bf16 KV against FP8 KV (Llama-3.1-8B shape), default knobs then KNOBS_8K.
l31=/tmp/pagoda-llama-3.1-8b; mkdir -p $l31 && cp tests/data/models/llama-3-8b/* $l31/ && cp tests/data/models/llama-3.1-8b/config.json $l31/
for knobs in "" ${KNOBS_8K:-}; do
  tag=$(echo "${knobs:-default}" | tr ' =' '_-')
  for d in auto fp8; do
    env ${knobs//,/ } timeout 90 $P bench latency -m $l31 --load-format dummy --device cuda --kv-cache-dtype $d \
      --batch-size 1 --input-len 8000 --output-len 256 --num-iters 2 --max-model-len 8448 --json >$R/b1_8k_${d}_$tag.json 2>/dev/null
    echo "8k batch 1 ${knobs:-default} kv=$d: $(python3 -c "import json; d=json.load(open('$R/b1_8k_${d}_$tag.json')); print(round(d['decode_tokens_per_second_per_sequence'],1), 'tok/s')" 2>&1 | tail -1)"
    save
  done
done
# 7. Decode by batch, 00 against 11.
for cfg in 00 11; do
  fa=${cfg:0:1}; nq=${cfg:1:1}
  for b in 1 256; do
    PAGODA_FP8_FAST_ACCUM=$fa PAGODA_FP8_NORM_QUANT=$nq timeout 60 $P bench latency $M --quantization fp8 --batch-size $b --max-num-seqs $b --input-len 128 --output-len 64 --num-iters 1 --json >$R/dec_${cfg}_b$b.json 2>/dev/null
    echo "decode fa=$fa nq=$nq batch $b: $(python3 -c "import json; d=json.load(open('$R/dec_${cfg}_b$b.json')); print(round(d['decode_tokens_per_second_per_sequence'],1), 'tok/s per sequence')" 2>&1 | tail -1)"
  done
done
save
