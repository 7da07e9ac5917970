#!/usr/bin/env bash
# Session 36 probe 26: the warp-specialized GEMM's converter with each chunk's params copied beside its codes 3 chunks
# early (PAGODA_WS_PARAMS_RING=1, default) against the params loaded into registers a chunk ahead (=0): correctness,
# the kernel table at 256 and 512 tokens, W4 decode at batch 256 and offline 1,000 x 128/128 (bf16 in the same call).
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
timeout 120 $T --gtest_filter='Quant*:-*Prints*' >$R/gtest-quant.log 2>&1; echo "quant tests rc=$? ok=$(grep -c '^\[       OK' $R/gtest-quant.log)"
grep -E "^\[  FAILED|Failure" $R/gtest-quant.log | head -10
save
for t in 256 512; do
  for ring in 1 0; do
    PAGODA_WS_PARAMS_RING=$ring PAGODA_PROFILE=1 PAGODA_QUANT_GEMM_TABLE=0:$t timeout 90 $T --gtest_filter='QuantGemm.PrintsTimesOnLlamaShapes' >$R/table_t${t}_ring$ring.log 2>&1
    echo "T=$t ring=$ring:"; grep '\[ gemm' $R/table_t${t}_ring$ring.log | sed -E 's/.*(int[48][^ ]*) +T= *([0-9]+) N= *([0-9]+) K= *([0-9]+).*warp-specialized +([0-9.]+) us.*/  \1 N=\3 K=\4 ws \5 us/'
  done
done
save
M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096"
for ring in 1 0; do
  o=$R/lat_awq_ring${ring}_b256
  PAGODA_WS_PARAMS_RING=$ring timeout 100 $P --log-level info bench latency $M --quantization awq --batch-size 256 --max-num-seqs 256 \
    --input-len 128 --output-len 64 --num-iters 1 --json >$o.json 2>$o.log
  echo "awq b256 ring=$ring rc=$?: $(python3 -c "import json; d=json.load(open('$o.json')); print(round(d['decode_tokens_per_second_per_sequence']*256), 'tok/s')" 2>&1 | tail -1)"
done
save
for run in "awq 1" "awq 0" "none 1"; do
  set -- $run
  o=$R/thr_$1_ring$2
  PAGODA_WS_PARAMS_RING=$2 timeout 150 $P --log-level info bench throughput $M --quantization $1 --num-prompts 1000 --input-len 128 --output-len 128 \
    --max-num-seqs 256 --json >$o.json 2>$o.log
  echo "$1 ring=$2 offline rc=$?: $(python3 -c "import json; d=json.load(open('$o.json')); print(round(d['output_tokens_per_second']), 'output tok/s')" 2>&1 | tail -1)"
  save
done
