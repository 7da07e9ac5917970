#!/usr/bin/env bash
# Session 37 probe 31: the decode table by batch (1, 4, 16, 64, 256) for bf16, W4A16 g128, W8A16 and FP8 W8A8 at the
# committed code (the warp-specialized GEMM takes 129 to 512 tokens), the command of
# tests/unit/plan/test_h200_prediction.cpp's table.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/o}
tar -xJf device_bundle.tar.xz
scripts/device/run.sh unpack-only >/dev/null 2>&1
R=$OUT/r; mkdir -p $R
save() { tar -cJf $OUT/results.tar.xz -C $OUT r; }
export LD_LIBRARY_PATH="$PWD/device_bundle/lib:$(python3 -c 'import nvidia.cublas,os;print(os.path.join(list(nvidia.cublas.__path__)[0],"lib"))' 2>/dev/null):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/device.txt
cat device_bundle/COMMIT
P=device_bundle/bin/pagoda
M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096"
for b in 256 64 16 4 1; do for kind in none awq int8 fp8; do
  o=$R/dec_${kind}_b$b
  timeout 60 $P bench latency $M --quantization $kind --batch-size $b --max-num-seqs $b --input-len 128 --output-len 64 --num-iters 1 --json >$o.json 2>$o.log
  echo "$kind batch $b: $(python3 -c "import json; d=json.load(open('$o.json')); print(round(d['decode_tokens_per_second_per_sequence']*$b,1), 'tok/s')" 2>&1 | tail -1)"
  save
done; done
