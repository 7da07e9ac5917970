#!/usr/bin/env bash
# Session 34 probe 14: batch-1 decode with and without a tokenizer in the model directory (probe 13's 8k runs had
# none and ran faster than the H100's memory allows). bench latency now refuses a run whose requests ended early.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/o}
tar -xJf device_bundle.tar.xz
scripts/device/run.sh unpack-only >/dev/null 2>&1
R=$OUT/r; mkdir -p $R
save() { tar -cJf $OUT/results.tar.xz -C $OUT r; }
export LD_LIBRARY_PATH="$PWD/device_bundle/lib:$(python3 -c 'import nvidia.cublas,os;print(os.path.join(list(nvidia.cublas.__path__)[0],"lib"))' 2>/dev/null):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/device.txt
P=device_bundle/bin/pagoda
none=/tmp/l31-none; mkdir -p $none && cp tests/data/models/llama-3-8b/config.json tests/data/models/llama-3-8b/generation_config.json $none/ && cp tests/data/models/llama-3.1-8b/config.json $none/
tok=/tmp/l31-tok; mkdir -p $tok && cp -L tests/data/models/llama-3-8b/* $tok/ && cp tests/data/models/llama-3.1-8b/config.json $tok/
ls -la $none $tok | tee -a $R/device.txt
for ctx in 128 8000; do
  for m in $none $tok $none $tok; do
    timeout 90 $P bench latency -m $m --load-format dummy --device cuda --batch-size 1 --input-len $ctx --output-len 256 \
      --num-iters 2 --max-model-len 8448 --json >$R/b1_${ctx}_$(basename $m).json 2>$R/b1_${ctx}_$(basename $m).err
    echo "ctx $ctx $(basename $m) rc=$?: $(python3 -c "import json; d=json.load(open('$R/b1_${ctx}_$(basename $m).json')); print(round(d['decode_tokens_per_second_per_sequence'],1), 'tok/s')" 2>&1 | tail -1) $(tail -c 300 $R/b1_${ctx}_$(basename $m).err)"
  done
  save
done
# Decode blocks per SM, whole model with the tokenizer: 4 (default) against 2, bf16 and FP8 KV.
for knobs in "" "PAGODA_DECODE_BLOCKS_PER_SM=2"; do
  tag=$(echo "${knobs:-default}" | tr ' =' '_-')
  for ctx in 2048 8000 32000; do
    for d in auto fp8; do
      env $knobs timeout 90 $P bench latency -m $tok --load-format dummy --device cuda --kv-cache-dtype $d --batch-size 1 \
        --input-len $ctx --output-len 256 --num-iters 2 --max-model-len 32768 --json >$R/bps_${ctx}_${d}_$tag.json 2>$R/bps_${ctx}_${d}_$tag.err
      echo "${knobs:-default} ctx $ctx kv=$d rc=$?: $(python3 -c "import json; d=json.load(open('$R/bps_${ctx}_${d}_$tag.json')); print(round(d['decode_tokens_per_second_per_sequence'],1), 'tok/s')" 2>&1 | tail -1)"
    done
  done
  save
done
