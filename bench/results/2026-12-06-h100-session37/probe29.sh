#!/usr/bin/env bash
# Session 37 probe 29: decode attention's spans merged by their last block (tickets) instead of a merge kernel.
# Every GPU test, the kernels alone (DecodeStepProfile) with PAGODA_DECODE_MERGE_KERNEL=0/1, then batch-1 decode
# end to end (Llama-3-8B shape, 128-token prompt) for awq and bf16, alternating the two settings.
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
timeout 260 $T >$R/gtest-all.log 2>&1; echo "gpu tests rc=$? ok=$(grep -c '^\[       OK' $R/gtest-all.log) failed=$(grep -c '^\[  FAILED' $R/gtest-all.log)"
grep -E "^\[  FAILED|Failure" $R/gtest-all.log | head -10
save
for mk in 0 1; do
  PAGODA_DECODE_MERGE_KERNEL=$mk PAGODA_PROFILE=1 timeout 60 $T --gtest_filter='DecodeStepProfile.*' >$R/profile_mk$mk.log 2>&1
  echo "merge kernel=$mk:"; grep -E "attention|profile \]" $R/profile_mk$mk.log | head -20
done
save
M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096"
lat() {  # kind mk round
  local o=$R/lat_$1_mk$2_r$3
  PAGODA_DECODE_MERGE_KERNEL=$2 timeout 90 $P --log-level info bench latency $M --quantization $1 --batch-size 1 --max-num-seqs 1 \
    --input-len 128 --output-len 256 --num-iters 2 --json >$o.json 2>$o.log
  echo "$1 merge-kernel=$2 round $3 rc=$?: $(python3 -c "import json; d=json.load(open('$o.json')); print(round(d['decode_tokens_per_second_per_sequence'],1), 'tok/s')" 2>&1 | tail -1)"
}
for r in 1 2; do for kind in awq none; do for mk in 0 1; do lat $kind $mk $r; done; done; save; done
