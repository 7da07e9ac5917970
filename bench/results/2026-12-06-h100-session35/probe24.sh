#!/usr/bin/env bash
# Session 35 probe 24: W4 perplexity on the GPU through quant_gemm_ws (512-token steps) and without it.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/o}
tar -xJf device_bundle.tar.xz
scripts/device/run.sh unpack-only >/dev/null 2>&1
R=$OUT/r; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/device_bundle/lib:$(python3 -c 'import nvidia.cublas,os;print(os.path.join(list(nvidia.cublas.__path__)[0],"lib"))' 2>/dev/null):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/device.txt
for m in awq-w4-g128-gemm awq-w4-g32-gemm; do
  for ws in 129 0; do
    echo "$m ws=$ws steps of 512: $(PAGODA_QUANT_WS_MIN_TOKENS=$ws timeout 60 device_bundle/bin/pagoda eval perplexity --device cuda --model tests/data/models/quant/$m \
      --tokenizer tests/data/models/quant/tinystories-656k --text-file tests/data/text/tinystories_valid_part1.txt --ctx-size 512 --chunks 60 \
      --max-num-batched-tokens 512 --max-num-seqs 1 --json 2>$R/ppl_${m}_$ws.log | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["perplexity"])' 2>&1)" | tee -a $R/ppl.txt
  done
done
tar -cJf $OUT/results.tar.xz -C $OUT r
