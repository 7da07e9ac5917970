#!/usr/bin/env bash
# Issue 17's step-change load on the GPU machine: Llama-3-8B-shaped dummy weights, `pagoda serve` with static
# token budgets and with the adaptive batch controller, each under the same `pagoda bench serve` schedule
# (1,024 in / 128 out; SCHEDULE, default 8 -> 32 -> 8 req/s) with goodput at TTFT <= 200 ms, TPOT <= 50 ms.
# `fallback:BUDGET` serves with the precision fallback (--fallback-quantization $FALLBACK, default fp8, at
# --slo-tpot-ms $SLO_TPOT_MS over --fallback-window-s $FALLBACK_WINDOW_S); its switches (log lines with their
# times, and /metrics) are kept beside the results, with the time the load generator started. `windowMS:BUDGET`
# serves with the TTL batching window (--batch-wait-ms MS). INPUT_LEN / OUTPUT_LEN change the request shape.
# Run from the repository root with device_bundle/ unpacked (scripts/device/run.sh does that); results in $OUT.
#   CONFIGS="static:1024 static:2048 static:4096 adaptive:4096" SCHEDULE=8:15,32:15,8:15 scripts/device/controller_bench.sh
#   CONFIGS="static:2048 fallback:2048" SCHEDULE=8:20,50:30,8:60 SLO_TPOT_MS=40 scripts/device/controller_bench.sh
#   CONFIGS="static:2048 window20:2048" SCHEDULE=16:30 INPUT_LEN=128 OUTPUT_LEN=256 scripts/device/controller_bench.sh
set -uo pipefail
OUT=${OUT:-/tmp/pagoda-device-out}
PAGODA=${PAGODA:-$PWD/device_bundle/bin/pagoda}
SCHEDULE=${SCHEDULE:-8:15,32:15,8:15}
mkdir -p "$OUT"
# The model directory's tokenizer links to tiny-llama3-hf's, kept compressed (tests/CMakeLists.txt).
t=tests/data/models/tiny-llama3-hf/tokenizer.json
[ -f $t ] || tar -xJf $t.tar.xz -C "$(dirname $t)"
PORT=8124
for config in ${CONFIGS:-static:1024 static:2048 static:4096 adaptive:4096}; do
  kind=${config%%:*}
  budget=${config##*:}
  flags=(--max-num-batched-tokens "$budget")
  [ "$kind" = adaptive ] && flags+=(--batch-controller adaptive --slo-tpot-ms "${SLO_TPOT_MS:-40}" --slo-ttft-ms "${SLO_TTFT_MS:-200}")
  # slo-static / slo-adaptive: the same with --scheduling-policy slo (deadline-first admission, policy.h).
  [ "$kind" = slo-static ] && flags+=(--scheduling-policy slo --slo-tpot-ms "${SLO_TPOT_MS:-50}" --slo-ttft-ms "${SLO_TTFT_MS:-200}")
  [ "$kind" = slo-adaptive ] && flags+=(--scheduling-policy slo --batch-controller adaptive --slo-tpot-ms "${SLO_TPOT_MS:-40}"
                                        --slo-ttft-ms "${SLO_TTFT_MS:-200}")
  # slo-adaptive-fallback: slo-adaptive with the precision fallback as well (the whole adaptive system of issue 17).
  [ "$kind" = slo-adaptive-fallback ] && flags+=(--scheduling-policy slo --batch-controller adaptive --slo-tpot-ms
                                                 "${SLO_TPOT_MS:-40}" --slo-ttft-ms "${SLO_TTFT_MS:-200}"
                                                 --fallback-quantization "${FALLBACK:-fp8}" --fallback-window-s
                                                 "${FALLBACK_WINDOW_S:-10}")
  [[ "$kind" == window* ]] && flags+=(--batch-wait-ms "${kind#window}")
  [ "$kind" = fallback ] && flags+=(--fallback-quantization "${FALLBACK:-fp8}" --slo-tpot-ms "${SLO_TPOT_MS:-40}"
                                    --fallback-window-s "${FALLBACK_WINDOW_S:-10}")
  "$PAGODA" --log-level info serve -m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096 \
    --port $PORT "${flags[@]}" >"$OUT/server_${kind}_$budget.log" 2>&1 &
  server=$!
  for _ in $(seq 180); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/health')" 2>/dev/null && break
    sleep 1
  done
  date -u +"bench start %H:%M:%S.%N" >"$OUT/bench_start_${kind}_$budget.txt"
  timeout "${BENCH_TIMEOUT:-240}" "$PAGODA" bench serve --port $PORT --ignore-eos --no-progress --seed 1 --dataset random \
    --random-input-len "${INPUT_LEN:-1024}" --random-output-len "${OUTPUT_LEN:-128}" --num-prompts "${NUM_PROMPTS:-720}" --request-rate-schedule "$SCHEDULE" \
    --goodput ttft:200 tpot:50 --label "$config" --json "$OUT/controller_${kind}_$budget.json" >"$OUT/controller_${kind}_$budget.txt" 2>&1
  echo "== $config"
  sed -n '/Phases/,$p' "$OUT/controller_${kind}_$budget.txt"
  grep -E "Request goodput|Mean TTFT|P99 TTFT|Mean TPOT|P99 TPOT|Request throughput|Output token throughput" "$OUT/controller_${kind}_$budget.txt"
  python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics').read().decode())" \
    >"$OUT/metrics_${kind}_$budget.txt" 2>&1
  cat "$OUT/bench_start_${kind}_$budget.txt"
  grep -E "precision fallback|weights on the GPU|CUDA graphs captured" "$OUT/server_${kind}_$budget.log"
  grep -E "^pagoda:precision_fallback|^pagoda:batch_window" "$OUT/metrics_${kind}_$budget.txt"
  kill -INT $server; wait $server
done
