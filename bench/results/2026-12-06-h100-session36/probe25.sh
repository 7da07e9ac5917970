#!/usr/bin/env bash
# Session 36 probe 25: every GPU test (last session's eca7d59/db12edc never ran on a GPU; the L2-prefetch tests), then
# batch-1 decode of each kind with PAGODA_L2_PREFETCH_MIB=0 (off) against the default 16 (and 8, 32 for awq).
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
timeout 230 $T >$R/gtest-all.log 2>&1; echo "gpu tests rc=$? ok=$(grep -c '^\[       OK' $R/gtest-all.log) failed=$(grep -c '^\[  FAILED' $R/gtest-all.log)"
grep -E "^\[  FAILED|Failure" $R/gtest-all.log | head -10
save
M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096"
lat() {  # kind mib batch extra...
  local kind=$1 mib=$2 b=$3; shift 3
  local o=$R/lat_${kind}_mib${mib}_b$b$(echo "$*" | tr -d ' -')
  PAGODA_L2_PREFETCH_MIB=$mib timeout 90 $P --log-level info bench latency $M --quantization $kind "$@" --batch-size $b --max-num-seqs $b \
    --input-len 128 --output-len 256 --num-iters 2 --json >$o.json 2>$o.log
  echo "$kind mib=$mib b=$b $* rc=$?: $(python3 -c "import json; d=json.load(open('$o.json')); print(round(d['decode_tokens_per_second_per_sequence']*$b,1), 'tok/s')" 2>&1 | tail -1)"
}
for kind in awq none int8 fp8; do
  for mib in 0 16; do lat $kind $mib 1; done
  save
done
for mib in 8 32; do lat awq $mib 1; done
for mib in 0 16; do lat awq $mib 1 --quantize-lm-head w4; done
save
for mib in 0 16; do lat awq $mib 16; done
save
