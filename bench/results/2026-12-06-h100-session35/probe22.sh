#!/usr/bin/env bash
# Session 35 probe 22: the warp-specialized GEMM with its params in two sets in turn and K slices by estimated time; the band
# scales as bf16 pairs (times_split): correctness, gate-up by mode, the table, then W4/W8 decode at 160/256 and offline.
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
timeout 120 $T --gtest_filter='QuantGemm*:-*Prints*' >$R/gtest-correct.log 2>&1; echo "correctness rc=$?"
grep -E "^\[  (FAILED|PASSED) |Failure" $R/gtest-correct.log | head -10
for mode in 0 1; do
  PAGODA_WS_MODE=$mode PAGODA_PROFILE=1 PAGODA_QUANT_GEMM_TABLE=28672:256 timeout 60 $T --gtest_filter='QuantGemm.PrintsTimesOnLlamaShapes' >$R/t256_m$mode.log 2>&1
  echo "T=256 mode=$mode: $(grep '^\[ gemm' $R/t256_m$mode.log | head -1 | grep -o 'copy + cuBLAS *[0-9.]* us, cuBLAS bf16 *[0-9.]* us\|warp-specialized *[0-9.]* us ( *[0-9.]* TFLOP/s)' | tr '\n' ' ')"
done
save
grep -q "FAILED" $R/gtest-correct.log && exit 0
PAGODA_PROFILE=1 timeout 200 $T --gtest_filter='QuantGemm.PrintsTimesOnLlamaShapes' >$R/gtest-table.log 2>&1; echo "table rc=$?"
python3 - $R/gtest-table.log <<'PY'
import re,sys
print('form T N K mma wgmma copy bf16 ws ws_TFLOPs')
for l in open(sys.argv[1]):
    if not l.startswith('[ gemm'): continue
    m=re.search(r'\] (\S+) +T= *(\d+) N= *(\d+) K= *(\d+): quant_gemm +([\d.]+) us.*wgmma +([\d.]+) us.*copy \+ cuBLAS +([\d.]+) us, cuBLAS bf16 +([\d.]+) us.*warp-specialized +([\d.]+) us \( *([\d.]+) TFLOP',l)
    if m and m.group(2) in ('128','192','256','512','1024'): print(' '.join(m.groups()))
PY
save
M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096"
for kind in awq int8; do
  for ws in 0 129; do
    for b in 160 256; do
      o=$R/lat_${kind}_ws${ws}_b$b
      PAGODA_QUANT_WS_MIN_TOKENS=$ws timeout 120 $P --log-level info bench latency $M --quantization $kind --batch-size $b --max-num-seqs $b \
        --input-len 128 --output-len 64 --num-iters 1 --json >$o.json 2>$o.log
      echo "$kind ws=$ws b=$b rc=$?: $(python3 -c "import json; d=json.load(open('$o.json')); print(round(d['decode_tokens_per_second_per_sequence']*$b), 'tok/s')" 2>&1 | tail -1)"
      save
    done
  done
done
for ws in 0 129; do
  o=$R/thr_awq_ws$ws
  PAGODA_QUANT_WS_MIN_TOKENS=$ws timeout 200 $P --log-level info bench throughput $M --quantization awq --num-prompts 1000 \
    --input-len 128 --output-len 128 --max-num-seqs 256 --json >$o.json 2>$o.log
  echo "awq offline ws=$ws rc=$?: $(python3 -c "import json; d=json.load(open('$o.json')); print(round(d['output_tokens_per_second']), 'output tok/s')" 2>&1 | tail -1)"
  save
done
o=$R/thr_none
timeout 200 $P --log-level info bench throughput $M --quantization none --num-prompts 1000 --input-len 128 --output-len 128 \
  --max-num-seqs 256 --json >$o.json 2>$o.log
echo "bf16 offline rc=$?: $(python3 -c "import json; d=json.load(open('$o.json')); print(round(d['output_tokens_per_second']), 'output tok/s')" 2>&1 | tail -1)"
save
