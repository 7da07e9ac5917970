#!/usr/bin/env bash
# Runs each libFuzzer target for SECONDS from its seed corpus (fuzz/corpus/<target>/); the inputs it finds
# are kept in build/fuzz/corpus/<target>/ (so later runs go on from them), a crash or leak is written to
# build/fuzz/artifacts/. Prints executions per target; exits 1 when any target found something.
#   scripts/fuzz.sh SECONDS TARGET...        (make fuzz builds the targets and calls this)
# FUZZ_SEED=N fixes libFuzzer's random seed (the CI smoke test uses one, so that its mutations repeat
# from run to run instead of finding something new at random); FUZZ_WORK=DIR keeps the found inputs there
# instead of build/fuzz/corpus.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=$1
shift
work=${FUZZ_WORK:-build/fuzz/corpus}
seed=()
[ -n "${FUZZ_SEED:-}" ] && seed=(-seed="$FUZZ_SEED")
mkdir -p build/fuzz/artifacts
status=0
summary=()
for t in "$@"; do
  mkdir -p "$work/$t"
  log="build/fuzz/$t.log"
  "build/fuzz/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "${seed[@]}" \
    -artifact_prefix="build/fuzz/artifacts/$t-" "$work/$t" "fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  runs=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$log" | grep -oE "[0-9]+$" | tail -1)
  corpus=$(find "$work/$t" -type f | wc -l)
  summary+=("$(printf '%-22s rc=%d  %12s executions  %6d inputs in its corpus' "$t" "$rc" "${runs:-?}" "$corpus")")
  if [ $rc -ne 0 ]; then
    status=1
    echo "---- $t found something (rc=$rc); the end of $log:"
    tail -40 "$log"
  fi
done
printf '%s\n' "${summary[@]}"
exit $status
