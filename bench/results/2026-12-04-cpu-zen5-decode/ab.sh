#!/usr/bin/env bash
reps=$1; shift
declare -A res
for i in $(seq $reps); do
  for cfg in "$@"; do
    out=$(env $cfg bash -c '"${BIN:-/work/main/build/cpu/bench/kernels/bench_cpu_linear}" --tokens ${TOK:-1} --dtypes ${DT:-q4_0} --isa avx512 --threads 2 --shape ${SHAPE1:-65536:2048} --shape ${SHAPE2:-16384:8192} --reps 15' 2>&1 | tail -2)
    while read -r isa dt tok n k med best gf gbs; do
      g=$(python3 -c "print($gbs*$med/$best)")
      res["$cfg|$n:$k"]+="$g "
    done <<< "$out"
  done
done
for key in "${!res[@]}"; do
  echo "$key $(python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[1:]]; print('median %.1f  min %.1f  max %.1f' % (statistics.median(v), min(v), max(v)))" ${res[$key]})"
done | sort
