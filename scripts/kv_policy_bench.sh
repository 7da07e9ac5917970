#!/usr/bin/env bash
# The KV pool's policies on one multi-tenant workload (issue #16): for each policy a fresh `pagoda serve`
# with the benchmark's tenants file, then the same `pagoda bench serve --dataset multi-tenant` (same seed),
# and a table of prefix-cache hit rate and TTFT per policy, overall and for the weighted, periodic and noisy
# tenants. Policies (POLICIES): lru, lru-k (K = 2; lru-k3 for K = 3), each + host tier (lru-k+host), and
# + prefetch (lru-k+host+prefetch); a suffix @SCHED adds --scheduling-policy SCHED (lru-k+host@fair).
#
#   OUT=bench/results/DIR PAGODA=build/cpu/bin/pagoda SERVE_ARGS="--model M ..." BENCH_ARGS="..." \
#     HOST_MEMORY=64MiB scripts/kv_policy_bench.sh
set -euo pipefail
PAGODA=${PAGODA:-build/cpu/bin/pagoda}
OUT=${OUT_DIR:-${OUT:-bench/results/kv-policies}}
PORT=${PORT:-18795}
SERVE_ARGS=${SERVE_ARGS:-}
BENCH_ARGS=${BENCH_ARGS:---prefix-len 128 --random-input-len 32 --random-output-len 16 --ignore-eos --num-prompts 400 --request-rate 40}
HOST_MEMORY=${HOST_MEMORY:-64MiB}
PREFETCH_MS=${PREFETCH_MS:-}  # empty: the server's default --kv-prefetch-interval-ms
POLICIES=${POLICIES:-"lru lru-k lru+host lru-k+host lru-k+host+prefetch"}
mkdir -p "$OUT"
# shellcheck disable=SC2086
"$PAGODA" bench serve --dataset multi-tenant $BENCH_ARGS --mt-write-tenants-file "$OUT/tenants.json" >/dev/null

for entry in $POLICIES; do
  policy=${entry%%@*}
  tag=${entry//+/_}
  tag=${tag//@/_}
  args=(--tenants-file "$OUT/tenants.json")
  [ "$policy" != "$entry" ] && args+=(--scheduling-policy "${entry#*@}")
  case $policy in
    lru-k[0-9]*) k=${policy#lru-k}; args+=(--kv-eviction lru-k --lru-k "${k%%+*}") ;;  # lru-k3: K = 3
    lru-k*) args+=(--kv-eviction lru-k) ;;
    *) args+=(--kv-eviction lru) ;;
  esac
  case $policy in
    *+prefetch) args+=(--kv-offload-memory "$HOST_MEMORY" ${PREFETCH_MS:+--kv-prefetch-interval-ms "$PREFETCH_MS"}) ;;
    *+host) args+=(--kv-offload-memory "$HOST_MEMORY" --kv-prefetch-interval-ms 0) ;;
  esac
  # shellcheck disable=SC2086
  "$PAGODA" serve --host 127.0.0.1 --port "$PORT" $SERVE_ARGS "${args[@]}" 2>"$OUT/serve-$tag.log" &
  server=$!
  for _ in $(seq 600); do
    grep -q "serving .* on http" "$OUT/serve-$tag.log" && break
    kill -0 $server 2>/dev/null || { cat "$OUT/serve-$tag.log"; exit 1; }
    sleep 0.5
  done
  # shellcheck disable=SC2086
  "$PAGODA" bench serve --port "$PORT" --dataset multi-tenant --seed 0 --label "$entry" $BENCH_ARGS \
    --json "$OUT/bench-$tag.json" >"$OUT/bench-$tag.txt"
  curl -s "http://127.0.0.1:$PORT/metrics" | grep -E "^pagoda:(prefix_cache|kv_host|kv_prefetch)" >"$OUT/metrics-$tag.txt" || true
  kill -TERM $server
  wait $server || true
done

python3 - "$OUT" $POLICIES <<'PY'
import json, sys
out, policies = sys.argv[1], sys.argv[2:]
rows = []
def pick(tenants, kind, name=None):
    return next((t for t in tenants if t["kind"] == kind and (name is None or t["name"] == name)), None)
print("| policy | hit rate, all | TTFT median / P99, all (ms) | tenant-0 (weight 0.8): hit rate, P99 TTFT | periodic: hit rate, P99 TTFT | noisy: P99 TTFT |")
print("| --- | --- | --- | --- | --- | --- |")
for p in policies:
    r = json.load(open(f"{out}/bench-{p.replace('+', '_').replace('@', '_')}.json"))["multi_tenant"]
    o, t0 = r["overall"], pick(r["tenants"], "ordinary", "tenant-0")
    per, noisy = pick(r["tenants"], "periodic"), pick(r["tenants"], "noisy")
    hit = lambda t: f'{t["prefix_cache_hit_rate"]:.3f}' if t and t["prefix_cache_hit_rate"] is not None else "-"
    ms = lambda t, k: f'{t[k]:.1f}' if t else "-"
    print(f'| {p} | {hit(o)} | {ms(o, "median_ttft_ms")} / {ms(o, "p99_ttft_ms")} | {hit(t0)}, {ms(t0, "p99_ttft_ms")} | '
          f'{hit(per)}, {ms(per, "p99_ttft_ms")} | {ms(noisy, "p99_ttft_ms")} |')
PY
