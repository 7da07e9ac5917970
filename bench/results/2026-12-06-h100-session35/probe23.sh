#!/usr/bin/env bash
# Session 35 probe 23: the committed form of quant_gemm_ws (band 129-512 by default): every GPU test, the quantized
# checkpoints' perplexity on the GPU, offline throughput (none awq int8) and W4/W8 decode at 192 and 256.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/o}
tar -xJf device_bundle.tar.xz
scripts/device/run.sh unpack-only >/dev/null 2>&1
R=$OUT/r; mkdir -p $R
save() { tar -cJf $OUT/results.tar.xz -C $OUT r; }
export LD_LIBRARY_PATH="$PWD/device_bundle/lib:$(python3 -c 'import nvidia.cublas,os;print(os.path.join(list(nvidia.cublas.__path__)[0],"lib"))' 2>/dev/null):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/device.txt
P=device_bundle/bin/pagoda; T=device_bundle/bin/test_cuda
timeout 240 $T >$R/gtest-all.log 2>&1; echo "gpu tests rc=$? ok=$(grep -c '^\[       OK' $R/gtest-all.log) failed=$(grep -c '^\[  FAILED' $R/gtest-all.log)"
grep -E "^\[  FAILED|Failure" $R/gtest-all.log | head -10
save
OUT=$R/quant timeout 150 scripts/device/run.sh quant >$R/quant.txt 2>&1; echo "quant rc=$?"; tail -12 $R/quant.txt
save
M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096"
for kind in awq int8; do
  for ws in 0 129; do
    for b in 192 256; do
      o=$R/lat_${kind}_ws${ws}_b$b
      PAGODA_QUANT_WS_MIN_TOKENS=$ws timeout 100 $P --log-level info bench latency $M --quantization $kind --batch-size $b --max-num-seqs $b \
        --input-len 128 --output-len 64 --num-iters 1 --json >$o.json 2>$o.log
      echo "$kind ws=$ws b=$b rc=$?: $(python3 -c "import json; d=json.load(open('$o.json')); print(round(d['decode_tokens_per_second_per_sequence']*$b), 'tok/s')" 2>&1 | tail -1)"
    done
  done
done
save
for kind in none awq int8; do
  o=$R/thr_$kind
  timeout 150 $P --log-level info bench throughput $M --quantization $kind --num-prompts 1000 --input-len 128 --output-len 128 \
    --max-num-seqs 256 --json >$o.json 2>$o.log
  echo "$kind offline rc=$?: $(python3 -c "import json; d=json.load(open('$o.json')); print(round(d['output_tokens_per_second']), 'output tok/s')" 2>&1 | tail -1)"
  save
done
