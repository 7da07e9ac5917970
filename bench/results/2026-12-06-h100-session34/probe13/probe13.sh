#!/usr/bin/env bash
# Session 34 probe 13 (carry device_bundle.tar.xz and .device): decode-span knobs (attention alone, every case;
# whole model at batch 1, 8k and 32k), then every GPU test at the new FP8 defaults, then FP8 offline.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/o}
tar -xJf device_bundle.tar.xz
R=$OUT/r; mkdir -p $R
save() { tar -cJf $OUT/results.tar.xz -C $OUT r; }
export LD_LIBRARY_PATH="$PWD/device_bundle/lib:$(python3 -c 'import nvidia.cublas,os;print(os.path.join(list(nvidia.cublas.__path__)[0],"lib"))' 2>/dev/null):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PAGODA_TEST_DATA_DIR="$PWD/tests/data"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/device.txt
echo "bundle built from the tree of 659d92f"; cat device_bundle/COMMIT | tee -a $R/device.txt
T=device_bundle/bin/test_cuda
P=device_bundle/bin/pagoda
SETTINGS=("" "PAGODA_DECODE_BLOCKS_PER_SM=2" "PAGODA_DECODE_BLOCKS_PER_SM=3" "PAGODA_DECODE_LONG_SPAN=256" "PAGODA_DECODE_BLOCKS_PER_SM=2 PAGODA_DECODE_LONG_SPAN=256")
for knobs in "${SETTINGS[@]}"; do
  tag=$(echo "${knobs:-default}" | tr ' =' '_-')
  env $knobs PAGODA_PROFILE=1 timeout 60 $T --gtest_filter='DecodeStepProfile.AttentionBf16VsFp8Kv' >$R/attn_$tag.log 2>&1
  echo "== attention ${knobs:-default} rc=$?"; grep "\[ profile \]" $R/attn_$tag.log | sed 's/\[ profile \] //'
done
save
l31=/tmp/pagoda-llama-3.1-8b; mkdir -p $l31 && cp tests/data/models/llama-3-8b/* $l31/ && cp tests/data/models/llama-3.1-8b/config.json $l31/
for knobs in "" "PAGODA_DECODE_BLOCKS_PER_SM=2" "PAGODA_DECODE_LONG_SPAN=256"; do
  tag=$(echo "${knobs:-default}" | tr ' =' '_-')
  for d in auto fp8; do
    env $knobs timeout 90 $P bench latency -m $l31 --load-format dummy --device cuda --kv-cache-dtype $d \
      --batch-size 1 --input-len 8000 --output-len 256 --num-iters 2 --max-model-len 8448 --json >$R/b1_8k_${d}_$tag.json 2>/dev/null
    echo "8k batch 1 ${knobs:-default} kv=$d: $(python3 -c "import json; d=json.load(open('$R/b1_8k_${d}_$tag.json')); print(round(d['decode_tokens_per_second_per_sequence'],1), 'tok/s')" 2>&1 | tail -1)"
  done
  save
done
timeout 280 $T >$R/gtest_all.log 2>&1
echo "GPU tests rc=$?"; grep -E "^\[  FAILED|^\[  PASSED|tests ran|SKIPPED \]" $R/gtest_all.log | head -20
save
M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096"
PAGODA_CUDA_STEP_TIMING=1 timeout 100 $P --log-level info bench throughput $M --quantization fp8 --kv-cache-dtype fp8 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --json >$R/tp_default.json 2>$R/tp_default.log
echo "offline fp8+fp8kv defaults: $(python3 -c "import json; print(round(json.load(open('$R/tp_default.json'))['output_tokens_per_second']))" 2>&1|tail -1) $(grep -o 'GPU [0-9.]* ms each' $R/tp_default.log | tail -1)"
save
