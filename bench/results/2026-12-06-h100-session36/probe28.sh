#!/usr/bin/env bash
# Session 36 probe 28: offline 1,000 x 128/128 W4A16 and bf16 with prompt chunks of 512 and 1,024 tokens against the
# default budget: chunks of at most 512 tokens take the warp-specialized GEMM instead of the bf16 copy + cuBLAS.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/o}
tar -xJf device_bundle.tar.xz
scripts/device/run.sh unpack-only >/dev/null 2>&1
R=$OUT/r; mkdir -p $R
save() { tar -cJf $OUT/results.tar.xz -C $OUT r; }
export LD_LIBRARY_PATH="$PWD/device_bundle/lib:$(python3 -c 'import nvidia.cublas,os;print(os.path.join(list(nvidia.cublas.__path__)[0],"lib"))' 2>/dev/null):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/device.txt
P=device_bundle/bin/pagoda
export PAGODA_WS_PARAMS_RING=0  # the bundle of probe 26: the committed form
M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096"
for run in "awq 0" "none 0" "awq 512" "none 512" "awq 1024" "none 1024" "int8 512" "int8 0"; do
  set -- $run
  extra=""; [ "$2" != 0 ] && extra="--max-num-batched-tokens $2"
  o=$R/thr_$1_mnbt$2
  timeout 150 $P --log-level info bench throughput $M --quantization $1 $extra --num-prompts 1000 --input-len 128 --output-len 128 \
    --max-num-seqs 256 --json >$o.json 2>$o.log
  echo "$1 mnbt=$2 rc=$?: $(python3 -c "import json; d=json.load(open('$o.json')); print(round(d['output_tokens_per_second']), 'output tok/s')" 2>&1 | tail -1)"
  save
done
