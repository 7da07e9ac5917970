#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with device_bundle.tar.xz carried (scripts/device/bundle.sh):
#   scripts/device/run.sh [tests] [gtest] [parity] [bench] [bench-quick] [long] [sweep] [profile] [serve] [quant] [quant-bench] [quant-throughput] [kernels] [kv] [kv-tier] [kv-sched] [kv-hit-cost] [kv-wide] [fuzz]
#   (default: tests parity bench long)
# tests: the GPU unit tests (kernels against host references, the model against the CPU backend and the
# reference outputs, graph replay against eager); parity: tests/tools/hf_parity_cuda.py against
# transformers; bench: Llama-3-8B-shaped dummy weights, bf16: batch-1 decode at 128 and 2,048 context, a
# 1,024-token prompt's time to first token, and offline throughput 128/128 and 1000/1000 at max-num-seqs 256;
# long: 4k and 8k prompts (batch 1 and 64, and offline 4096/128) with the default token budget;
# serve: `pagoda serve` with the same model under `pagoda bench serve` (random 1,024 in / 128 out over
# request rates up to saturation, and a shared-prefix run), with plots and the GPU timeline; sweep: batch-1
# decode at 128 and 2,048 context under each environment of SWEEP_ENVS (A/B runs in one call); profile: the
# batch-1 kernels alone (DecodeStepProfile) under each environment of PROFILE_ENVS; quant: `pagoda eval
# perplexity --device cuda` on the quantized checkpoints and llama.cpp's GGUF k-quant files in tests/data;
# quant-bench: decode tok/s by batch size with Llama-3-8B-shaped dummy weights of each kind; kv: bf16 vs
# FP8 KV cache (pool tokens, long-context decode, perplexity); kv-wide: bf16 vs FP8 KV with whole batches
# prefilled first (64 x 4k, the largest 8k batch each pool holds);
# fuzz: the fuzz targets of build/devfuzz (scripts/device/fuzz_bundle.sh) on the host's cores, FUZZ_JOBS
# ("target=N ...", default 2 of each) processes for FUZZ_SECONDS (default 300) each, in the background of
# the stages after it: counts in $OUT/fuzz_counts.txt, findings and logs in $OUT/fuzz.tar.xz.
# Details go to $OUT (JSON and logs); a short table is printed last.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/pagoda-device-out}
mkdir -p "$OUT"
[ -d device_bundle ] || tar -xJf device_bundle.tar.xz
# The reference files kept compressed in the repository (tests/CMakeLists.txt unpacks them when configuring).
for archive in tests/data/models/tiny-llama3-hf/tokenizer.json.tar.xz tests/data/models/tiny-mistral-spm-hf/tokenizer.json.tar.xz \
    tests/data/models/tiny-llama3-hf/model.safetensors.tar.xz tests/data/models/tiny-mistral-spm-hf/model.safetensors.tar.xz \
    tests/data/tokenizers/ggml-vocab-llama3-rebuilt.gguf.tar.xz; do
  [ -f "${archive%.tar.xz}" ] || tar -xJf "$archive" -C "$(dirname "$archive")"
done
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(tests parity bench long)

cublas_dirs=$(python3 - <<'PY' 2>/dev/null
import glob, os
dirs = set(os.path.dirname(p) for p in glob.glob('/usr/local/cuda*/lib64/libcublas.so.*') + glob.glob('/usr/local/cuda*/targets/*/lib/libcublas.so.*'))
try:
    import nvidia.cublas, os as o
    dirs.add(o.path.join(list(nvidia.cublas.__path__)[0], 'lib'))
except Exception:
    pass
print(':'.join(sorted(dirs)))
PY
)
export LD_LIBRARY_PATH="$PWD/device_bundle/lib:${cublas_dirs}:${LD_LIBRARY_PATH:-}"
export PAGODA_TEST_DATA_DIR="$PWD/tests/data"
PAGODA=$PWD/device_bundle/bin/pagoda
summary=()
fuzz_pids=()
note() { summary+=("$1"); }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader >"$OUT/gpu.txt" 2>&1
echo "GPU: $(cat "$OUT/gpu.txt"); commit $(cat device_bundle/COMMIT)"

for stage in "${stages[@]}"; do
  case $stage in
    tests)
      PAGODA_PROFILE=1 timeout 300 device_bundle/bin/test_cuda --gtest_output=json:"$OUT/gtest.json" >"$OUT/gtest.log" 2>&1
      rc=$?
      grep -E "^\[  (FAILED|PASSED|SKIPPED) |GB/s|worst|decided|PAGODA_CHECK|what\(\)|Failure|^\[ [a-zA-Z].* \]" "$OUT/gtest.log" | head -60
      [ $rc -ne 0 ] && tail -15 "$OUT/gtest.log"
      note "gpu unit tests: rc=$rc ($(grep -c '^\[       OK' "$OUT/gtest.log") ok, $(grep -c '^\[  FAILED' "$OUT/gtest.log") failed lines)"
      ;;
    parity)
      variants=()  # PARITY_VARIANTS="label:VAR=1;label2:VAR=2": pagoda also runs under each extra environment
      IFS=';' read -ra pv <<<"${PARITY_VARIANTS:-}"
      for v in "${pv[@]}"; do variants+=(--variant "$v"); done
      # PARITY_ARGS: more options, e.g. "--kv-cache-dtypes auto,fp8 --long 8000" (FP8 KV beside bf16 KV)
      timeout 480 python3 tests/tools/hf_parity_cuda.py --pagoda "$PAGODA" --out "$OUT/hf_parity.json" "${variants[@]}" \
        ${PARITY_ARGS:-} 2>"$OUT/hf_parity.log"
      note "hf parity: rc=$?"
      ;;
    bench|bench-quick)  # BENCH_QUANT=awq|int8|fp8|...: the same commands with that kind's dummy weights
      M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda${BENCH_QUANT:+ --quantization $BENCH_QUANT}"
      run_bench() {  # name, then the pagoda arguments
        local name=$1; shift
        PAGODA_CUDA_STEP_TIMING=1 timeout 400 "$PAGODA" --log-level info "$@" --json >"$OUT/bench_$name.json" 2>"$OUT/bench_$name.log"
        grep -h "graph replays" "$OUT/bench_$name.log"
        echo "$name rc=$? $(python3 -c "import json,sys; d=json.load(open('$OUT/bench_$name.json')); print({k: d[k] for k in d if 'per_second' in k or k in ('ttft_seconds','tpot_seconds','elapsed_time')})" 2>/dev/null)"
      }
      run_bench decode_ctx128 bench latency $M --batch-size 1 --input-len 128 --output-len 256 --num-iters 3 --max-model-len 4096
      run_bench decode_ctx2048 bench latency $M --batch-size 1 --input-len 2048 --output-len 256 --num-iters 3 --max-model-len 4096
      run_bench ttft_1024 bench latency $M --batch-size 1 --input-len 1024 --output-len 1 --num-iters 5 --max-model-len 4096
      run_bench throughput_128 bench throughput $M --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --max-model-len 4096
      [ "$stage" = bench ] && run_bench decode_ctx128_sync bench latency $M --batch-size 1 --input-len 128 --output-len 256 --num-iters 3 --max-model-len 4096 --no-async-scheduling
      [ "$stage" = bench ] && run_bench decode_ctx2048_sync bench latency $M --batch-size 1 --input-len 2048 --output-len 256 --num-iters 3 --max-model-len 4096 --no-async-scheduling
      [ "$stage" = bench ] && run_bench throughput_1000 bench throughput $M --num-prompts 1000 --input-len 1000 --output-len 1000 --max-num-seqs 256 --max-model-len 4096
      python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
def load(n):
    try: return json.load(open(f"{out}/bench_{n}.json"))
    except Exception: return None
rows = []
for n in ("decode_ctx128", "decode_ctx2048", "decode_ctx128_sync", "decode_ctx2048_sync"):
    d = load(n)
    if d: rows.append((n, f"{d['decode_tokens_per_second_per_sequence']:.1f} tok/s", f"target >= 240 tok/s"))
d = load("ttft_1024")
if d: rows.append(("ttft_1024", f"{1e3*d['ttft_seconds']['median']:.1f} ms", "target <= 35 ms"))
for n in ("throughput_128", "throughput_1000"):
    d = load(n)
    if d: rows.append((n, f"{d['output_tokens_per_second']:.0f} out tok/s", f"{d['total_tokens_per_second']:.0f} total"))
for r in rows: print(f"{r[0]:18} {r[1]:>18}   {r[2]}")
PY
      note "bench: see $OUT/bench_*.json"
      ;;
    kernels)  # GPU time per kernel under Nsight Compute (one pass, gpu__time_duration; no PDL overlap, launch gaps not
      # counted) of `pagoda bench latency` on Llama-3-8B-shaped dummy weights with KERNELS_ARGS (default W4 batch 1),
      # 128-token prompts and KERNELS_STEPS decode steps (default 8): launches and microseconds per kernel name, and the
      # total over the decode steps (start-up and prefill launches are in the table too: us/step means something only
      # for decode kernels)
      args=${KERNELS_ARGS:---quantization awq --batch-size 1 --max-num-seqs 1}
      steps=${KERNELS_STEPS:-8}
      timeout 500 ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base --log-file "$OUT/kernels.csv" \
        "$PAGODA" bench latency -m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096 $args \
        --input-len 128 --output-len $((steps + 1)) --num-iters 1 --num-iters-warmup 0 >"$OUT/kernels.log" 2>&1
      echo "kernels rc=$?: $args"
      python3 scripts/device/kernel_table.py "$OUT/kernels.csv" "$steps" | tee "$OUT/kernels.txt"
      note "kernels: $OUT/kernels.txt"
      ;;
    quant-bench)  # Llama-3-8B-shaped dummy weights in each kind (QUANT_KINDS, default "none awq int8 fp8"): decode
      # tok/s per sequence by batch size (QUANT_BATCHES, default "1 16 64 256"; 128-token prompts, 64 new tokens);
      # QUANT_EXTRA: more pagoda options (e.g. "--quantize-lm-head fp8"); QUANT_INPUT_LEN: the prompts' length (128)
      M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096"
      for kind in ${QUANT_KINDS:-none awq int8 fp8}; do
        for b in ${QUANT_BATCHES:-1 16 64 256}; do
          out=$OUT/qbench_${kind}_b$b
          timeout 150 "$PAGODA" --log-level info bench latency $M --quantization $kind ${QUANT_EXTRA:-} --batch-size $b --max-num-seqs $b \
            --input-len ${QUANT_INPUT_LEN:-128} --output-len ${QUANT_OUTPUT_LEN:-64} --num-iters 1 --json >"$out.json" 2>"$out.log"
          echo "$kind batch $b rc=$? $(python3 -c "import json; d=json.load(open('$out.json')); print(round(d['decode_tokens_per_second_per_sequence'], 1), 'tok/s per sequence,', round(d['decode_tokens_per_second_per_sequence'] * $b), 'tok/s')" 2>&1 | tail -1) $(grep -ho 'weights on the GPU: [0-9.]* GiB' "$out.log")"
        done
      done | tee "$OUT/quant_bench.txt"
      note "quant-bench: $OUT/quant_bench.txt"
      ;;
    quant-throughput)  # offline throughput of each kind (QUANT_KINDS, default "none awq int8 fp8"): the bench stage's
      # 1,000 x 128/128 at --max-num-seqs 256 (QUANT_PROMPTS, QUANT_INPUT_LEN, QUANT_OUTPUT_LEN change it)
      M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096"
      for kind in ${QUANT_KINDS:-none awq int8 fp8}; do
        out=$OUT/qthroughput_$kind
        timeout 300 "$PAGODA" --log-level info bench throughput $M --quantization $kind ${QUANT_EXTRA:-} \
          --num-prompts ${QUANT_PROMPTS:-1000} --input-len ${QUANT_INPUT_LEN:-128} --output-len ${QUANT_OUTPUT_LEN:-128} \
          --max-num-seqs 256 --json >"$out.json" 2>"$out.log"
        echo "$kind rc=$? $(python3 -c "import json; d=json.load(open('$out.json')); print(round(d['output_tokens_per_second']), 'output tok/s,', round(d['total_tokens_per_second']), 'total')" 2>&1 | tail -1)"
      done | tee "$OUT/quant_throughput.txt"
      note "quant-throughput: $OUT/quant_throughput.txt"
      ;;
    long)  # long prompts with the default --max-num-batched-tokens (2,048): chunked prefill, then decode
      M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 8192"
      run_long() {  # name, then the pagoda arguments
        local name=$1; shift
        PAGODA_CUDA_STEP_TIMING=1 timeout 300 "$PAGODA" --log-level info "$@" --json >"$OUT/long_$name.json" 2>"$OUT/long_$name.log"
        echo "$name rc=$? $(python3 -c "import json; d=json.load(open('$OUT/long_$name.json')); print({k: round(d[k], 2) for k in d if 'per_second' in k or k == 'elapsed_time'}, 'ttft_median_ms', round(1e3 * d['ttft_seconds']['median'], 1) if 'ttft_seconds' in d else '-')" 2>&1 | tail -1)"
      }
      run_long b1_ctx4096 bench latency $M --batch-size 1 --input-len 4096 --output-len 128 --num-iters 2
      run_long b1_ctx8000 bench latency $M --batch-size 1 --input-len 8000 --output-len 128 --num-iters 2
      run_long b64_ctx4096 bench latency $M --batch-size 64 --input-len 4096 --output-len 128 --num-iters 1
      run_long b64_ctx8000 bench latency $M --batch-size 64 --input-len 8000 --output-len 128 --num-iters 1
      run_long throughput_4096 bench throughput $M --num-prompts 256 --input-len 4096 --output-len 128 --max-num-seqs 256
      note "long: long_*.json"
      ;;
    sweep)  # batch-1 decode at 128 and 2,048 context for each environment in SWEEP_ENVS ("A=1 B=2;C=3;..."); SWEEP_ARGS:
      # more pagoda arguments (e.g. "--quantization awq": W4 weights)
      M="-m tests/data/models/llama-3-8b --load-format dummy --device cuda ${SWEEP_ARGS:-}"
      IFS=';' read -ra envs <<<"${SWEEP_ENVS:-}"
      [ ${#envs[@]} -eq 0 ] && envs=("")  # one run with the environment as it is
      i=0
      for e in "${envs[@]}"; do
        i=$((i + 1))
        for ctx in 128 2048; do
          env $e PAGODA_CUDA_STEP_TIMING=1 timeout 200 "$PAGODA" --log-level info bench latency $M \
            --batch-size 1 --input-len $ctx --output-len 128 --num-iters 2 --max-model-len 4096 --json \
            >"$OUT/sweep_${i}_ctx$ctx.json" 2>"$OUT/sweep_${i}_ctx$ctx.log"
          echo "[${e:-as is}] ctx $ctx: $(python3 -c "import json; d=json.load(open('$OUT/sweep_${i}_ctx$ctx.json')); print(round(d['decode_tokens_per_second_per_sequence'], 1), 'tok/s')" 2>&1) $(grep -h 'graph replays' "$OUT/sweep_${i}_ctx$ctx.log" | sed 's/.*timed), //')"
        done
      done
      note "sweep: sweep_*.json"
      ;;
    gtest)  # test_cuda --gtest_filter=GTEST_FILTER with PAGODA_PROFILE=1 under each environment in GTEST_ENVS ("A=1;B=2");
      # prints the result lines and the tables' lines that match GTEST_GREP
      IFS=';' read -ra envs <<<"${GTEST_ENVS:-}"
      [ ${#envs[@]} -eq 0 ] && envs=("")
      i=0
      for e in "${envs[@]}"; do
        i=$((i + 1))
        env $e PAGODA_PROFILE=1 timeout 300 device_bundle/bin/test_cuda --gtest_filter="${GTEST_FILTER:-*}" >"$OUT/gtest_$i.log" 2>&1
        echo "[${e:-as is}] rc=$?"
        grep -E "^\[  (FAILED|PASSED) |Failure" "$OUT/gtest_$i.log" | head -20
        grep -E "^\[ [a-z]+ *\]" "$OUT/gtest_$i.log" | grep -E "${GTEST_GREP:-.}" | head -80
      done
      note "gtest: gtest_*.log"
      ;;
    profile)  # DecodeStepProfile (kernels alone, batch 1) under each environment in PROFILE_ENVS ("A=1;B=2")
      IFS=';' read -ra envs <<<"${PROFILE_ENVS:-}"
      [ ${#envs[@]} -eq 0 ] && envs=("")
      i=0
      for e in "${envs[@]}"; do
        i=$((i + 1))
        env $e PAGODA_PROFILE=1 timeout 120 device_bundle/bin/test_cuda --gtest_filter='DecodeStepProfile.*' \
          >"$OUT/profile_$i.log" 2>&1
        echo "[${e:-as is}]"; grep -E "^\[ profile \]" "$OUT/profile_$i.log" | grep -vE "kernel \(batch"
      done
      note "profile: profile_*.log"
      ;;
    kv)  # bf16 vs FP8 KV (KV_DTYPES, default "auto fp8") on the Llama-3.1-8B shape (128k context; dummy weights):
      # the pool's tokens at the default --gpu-memory-utilization, batch-1 decode at 128, 8k and 32k context,
      # 64 x 4k decode; then (KV_PPL=1) perplexity of the trained tinystories-656k with each dtype
      l31=/tmp/pagoda-llama-3.1-8b
      mkdir -p $l31 && cp tests/data/models/llama-3-8b/* $l31/ && cp tests/data/models/llama-3.1-8b/config.json $l31/
      # KV_EXTRA: more pagoda arguments (e.g. "--quantization fp8": FP8 weights, so KV is a larger share of a step);
      # KV_CASES: which runs (default the first four; b1_ctx8k_of128k and b1_ctx32k_of128k: graphs for 131,072 keys).
      M="-m $l31 --load-format dummy --device cuda ${KV_EXTRA:-}"
      cases=" ${KV_CASES:-b1_ctx128 b1_ctx8k b1_ctx32k b64_ctx4k} "
      for d in ${KV_DTYPES:-auto fp8}; do
        run_kv() {  # name, then the pagoda arguments
          local name=$1; shift
          [[ "$cases" == *" $name "* ]] || return 0
          PAGODA_CUDA_STEP_TIMING=1 timeout 300 "$PAGODA" --log-level info bench latency $M --kv-cache-dtype $d "$@" --json \
            >"$OUT/kv_${d}_$name.json" 2>"$OUT/kv_${d}_$name.log"
          echo "$d $name rc=$? $(python3 -c "import json; d=json.load(open('$OUT/kv_${d}_$name.json')); print(round(d['decode_tokens_per_second_per_sequence'], 1), 'tok/s per sequence')" 2>&1 | tail -1) | $(grep -ho 'KV cache: .*' "$OUT/kv_${d}_$name.log" | head -1)"
        }
        run_kv b1_ctx128 --batch-size 1 --input-len 128 --output-len 256 --num-iters 3 --max-model-len 4096
        run_kv b1_ctx8k --batch-size 1 --input-len 8000 --output-len 256 --num-iters 2 --max-model-len 8448
        run_kv b1_ctx32k --batch-size 1 --input-len 32000 --output-len 256 --num-iters 1 --max-model-len 32768
        run_kv b64_ctx4k --batch-size 64 --max-num-seqs 64 --input-len 4096 --output-len 128 --num-iters 1 --max-model-len 4352
        # The same contexts with the graphs of Llama-3.1's whole 131,072-token context (what `serve` captures by default)
        run_kv b1_ctx8k_of128k --batch-size 1 --input-len 8000 --output-len 256 --num-iters 2 --max-model-len 131072
        run_kv b1_ctx32k_of128k --batch-size 1 --input-len 32000 --output-len 256 --num-iters 1 --max-model-len 131072
      done | tee "$OUT/kv.txt"
      if [ "${KV_PPL:-1}" = 1 ]; then
        for d in ${KV_DTYPES:-auto fp8}; do
          echo "tinystories-656k kv $d: $(timeout 120 "$PAGODA" eval perplexity --device cuda --model tests/data/models/quant/tinystories-656k \
            --kv-cache-dtype $d --text-file tests/data/text/tinystories_valid_part1.txt --ctx-size 512 --chunks 60 --json 2>>"$OUT/kv_ppl.log" | tail -1)"
        done | tee -a "$OUT/kv.txt"
      fi
      note "kv: $OUT/kv.txt"
      ;;
    kv-tier)  # the host KV tier (issue #16): the bundled model's e2e test on the GPU, then the KV pool policies on
      # the multi-tenant workload with Llama-3-8B-shaped dummy weights and a pool smaller than the tenants'
      # prefixes (scripts/kv_policy_bench.sh; KV_TIER_POLICIES, KV_TIER_BENCH_ARGS, KV_TIER_POOL, KV_TIER_SERVE_EXTRA override)
      PAGODA_E2E_SERVE_ARGS="--device cuda" timeout 300 python3 tests/e2e/test_server_host_tier.py --pagoda "$PAGODA" \
        --data tests/data >"$OUT/kv_tier_e2e.log" 2>&1
      note "kv-tier e2e: rc=$? ($(tail -1 "$OUT/kv_tier_e2e.log"))"
      OUT_DIR="$OUT/kv_tier" PAGODA="$PAGODA" PORT=18795 HOST_MEMORY=${KV_TIER_HOST_MEMORY:-8GiB} \
        POLICIES="${KV_TIER_POLICIES:-lru lru-k lru-k+host lru-k+host+prefetch}" \
        SERVE_ARGS="--model tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096 --kv-cache-memory ${KV_TIER_POOL:-2GiB} --max-num-seqs 64 ${KV_TIER_SERVE_EXTRA:-}" \
        BENCH_ARGS="${KV_TIER_BENCH_ARGS:---prefix-len 1024 --random-input-len 128 --random-output-len 64 --ignore-eos --num-prompts 300 --request-rate 12}" \
        timeout 540 scripts/kv_policy_bench.sh >"$OUT/kv_tier.txt" 2>&1
      note "kv-tier: rc=$? $OUT/kv_tier.txt"
      tail -8 "$OUT/kv_tier.txt"
      ;;
    kv-sched)  # the scheduling policies on issue #16's multi-tenant workload under pressure (the 24-tenant settings
      # of docs/PERFORMANCE.md, LRU-K + host tier): fcfs, priority and fair (KV_SCHED_POLICIES), then the weighted
      # tenant alone (tenant-0 without the others and the noisy flood: its unloaded TTFT; KV_SCHED_SKIP_UNLOADED=1
      # skips it); KV_SCHED_SERVE_EXTRA adds server options (e.g. --max-num-batched-tokens 512)
      serve="--model tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096 --kv-cache-memory 1536MiB --max-num-seqs 64 ${KV_SCHED_SERVE_EXTRA:-}"
      mt="--prefix-len 1024 --random-input-len 128 --random-output-len 64 --ignore-eos"
      OUT_DIR="$OUT/kv_sched" PAGODA="$PAGODA" PORT=18795 HOST_MEMORY=8GiB SERVE_ARGS="$serve" \
        POLICIES="${KV_SCHED_POLICIES:-lru-k+host lru-k+host@priority lru-k+host@fair}" \
        BENCH_ARGS="--mt-tenants 24 $mt --num-prompts 400 --request-rate 10" timeout 420 scripts/kv_policy_bench.sh >"$OUT/kv_sched.txt" 2>&1
      note "kv-sched: rc=$? $OUT/kv_sched.txt"
      tail -5 "$OUT/kv_sched.txt"
      if [ -z "${KV_SCHED_SKIP_UNLOADED:-}" ]; then
        OUT_DIR="$OUT/kv_sched_unloaded" PAGODA="$PAGODA" PORT=18795 HOST_MEMORY=8GiB SERVE_ARGS="$serve" POLICIES="lru-k+host" \
          BENCH_ARGS="--mt-tenants 1 --mt-noisy-share 0 $mt --num-prompts 60 --request-rate 2" timeout 150 scripts/kv_policy_bench.sh \
          >"$OUT/kv_sched_unloaded.txt" 2>&1
        note "kv-sched unloaded: rc=$? $OUT/kv_sched_unloaded.txt"
        tail -3 "$OUT/kv_sched_unloaded.txt"
      fi
      ;;
    kv-hit-cost)  # a prefix served from the host KV tier against recomputing it, by prefix length (bench/host_hit_cost.py)
      timeout 400 python3 bench/host_hit_cost.py --pagoda "$PAGODA" --json "$OUT/kv_hit_cost.json" -- \
        --model tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 8192 \
        --kv-cache-memory 2GiB >"$OUT/kv_hit_cost.txt" 2>&1
      note "kv-hit-cost: rc=$? $OUT/kv_hit_cost.txt"
      cat "$OUT/kv_hit_cost.txt"
      ;;
    kv-wide)  # bf16 vs FP8 KV: 64 x 4k with 16k-token prefill steps (the decode graphs then run all 64
      # sequences sooner; their GPU time is the clean figure), and the largest batch of 8k-token prompts that
      # each pool holds at the default token budget (KV_WIDE_BATCHES, default "104 208": 860,816 and
      # 1,708,304 tokens over 8,064 a sequence)
      l31=/tmp/pagoda-llama-3.1-8b
      mkdir -p $l31 && cp tests/data/models/llama-3-8b/* $l31/ && cp tests/data/models/llama-3.1-8b/config.json $l31/
      M="-m $l31 --load-format dummy --device cuda"
      set -- ${KV_WIDE_BATCHES:-104 208}
      for d in auto fp8; do
        run_kvw() {  # name, then the pagoda arguments
          local name=$1; shift
          PAGODA_CUDA_STEP_TIMING=1 timeout 280 "$PAGODA" --log-level info bench latency $M --kv-cache-dtype $d "$@" --json \
            >"$OUT/kvw_${d}_$name.json" 2>"$OUT/kvw_${d}_$name.log"
          echo "$d $name rc=$? $(python3 -c "import json; d=json.load(open('$OUT/kvw_${d}_$name.json')); print(round(d['decode_tokens_per_second_per_sequence'], 1), 'tok/s per sequence,', round(d['decode_tokens_per_second']), 'tok/s')" 2>&1 | tail -1) | $(grep -ho 'GPU [0-9.]* ms each' "$OUT/kvw_${d}_$name.log" | tail -1)"
        }
        run_kvw b64_ctx4k --batch-size 64 --max-num-seqs 64 --input-len 4096 --output-len 128 --num-iters 1 --max-model-len 4352 \
          --max-num-batched-tokens 16384
        b=$([ $d = auto ] && echo $1 || echo $2)
        run_kvw largest_ctx8k --batch-size $b --max-num-seqs $b --input-len 8000 --output-len 64 --num-iters 1 --max-model-len 8192
      done | tee "$OUT/kv_wide.txt"
      note "kv-wide: $OUT/kv_wide.txt"
      ;;
    quant)  # perplexity on the GPU of every quantized test checkpoint (llama.cpp's convention, 60 chunks of 512)
      text=tests/data/text/tinystories_valid_part1.txt
      python3 -c "import sys; t=open('$text', encoding='utf-8').read(); open('/tmp/ascii.txt', 'w').write(''.join(c for c in t if ord(c) < 127))"
      for m in tests/data/models/quant/tinystories-656k tests/data/models/quant/awq-w4-g128-gemm tests/data/models/quant/ct-fp8-dynamic \
               tests/data/models/gguf-kquant/kq-256-Q4_K_M.gguf tests/data/models/gguf-kquant/kq-256-Q5_K_M.gguf \
               tests/data/models/gguf-kquant/tinystories-656k-Q4_K_M.gguf; do
        case "$m" in *.gguf) t=/tmp/ascii.txt; tok=() ;; *) t=$text; tok=(--tokenizer tests/data/models/quant/tinystories-656k) ;; esac
        echo "$m: $(timeout 120 "$PAGODA" eval perplexity --device cuda --model "$m" "${tok[@]}" \
          --text-file "$t" --ctx-size 512 --chunks 60 --json 2>>"$OUT/quant.log" | tail -1)"
      done | tee "$OUT/quant.txt"
      m=tests/data/models/quant/ct-fp8-dynamic  # its W8A8 figure above; weight-only (W8A16) here
      echo "$m weight-only: $(timeout 120 "$PAGODA" eval perplexity --device cuda --model "$m" --tokenizer \
        tests/data/models/quant/tinystories-656k --activation-quantization none --text-file "$text" --ctx-size 512 \
        --chunks 60 --json 2>>"$OUT/quant.log" | tail -1)" | tee -a "$OUT/quant.txt"
      note "quant: perplexity on the GPU in $OUT/quant.txt"
      ;;
    fuzz)
      mkdir -p build/devfuzz/bin "$OUT/fuzz" && tar -xJf build/devfuzz/fuzzbins.tar.xz -C build/devfuzz/bin
      for spec in ${FUZZ_JOBS:-$(cd build/devfuzz/bin && for t in *; do [ -f "$t" ] && echo "$t=2"; done)}; do
        t=${spec%=*}
        mkdir -p "build/devfuzz/work/$t"
        for i in $(seq 1 "${spec#*=}"); do
          LD_LIBRARY_PATH="$PWD/build/devfuzz/bin/lib:$LD_LIBRARY_PATH" nice -n 5 "build/devfuzz/bin/$t" -max_total_time="${FUZZ_SECONDS:-300}" -timeout=10 -rss_limit_mb=2048 \
            -print_final_stats=1 -seed=$((7919 * i + 17)) -artifact_prefix="$OUT/fuzz/$t-$i-" "build/devfuzz/work/$t" \
            "fuzz/corpus/$t" >"$OUT/fuzz/$t.$i.log" 2>&1 &
          fuzz_pids+=($!)
        done
      done
      note "fuzz: ${#fuzz_pids[@]} processes in the background"
      ;;
    serve)
      mkdir -p "$OUT/serve"
      PORT=8123
      "$PAGODA" --log-level warn serve -m tests/data/models/llama-3-8b --load-format dummy --device cuda \
        --max-model-len 4096 --port $PORT --trace-file "$OUT/serve/trace.jsonl" \
        --gpu-timeline-file "$OUT/serve/gpu_timeline.svg" >"$OUT/serve/server.log" 2>&1 &
      server=$!
      for _ in $(seq 120); do
        python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/health')" 2>/dev/null && break
        sleep 1
      done
      B="$PAGODA bench serve --port $PORT --ignore-eos --no-progress"
      seed=0
      for rate in 4 8 16 24 32 inf; do
        seed=$((seed + 1))  # new prompts for every run: the prefix cache must not serve one run from another
        n=$([ $rate = inf ] && echo 400 || echo $((rate * 15)))
        timeout 200 $B --seed $seed --dataset random --random-input-len 1024 --random-output-len 128 --num-prompts $n \
          --request-rate $rate --label "rate $rate" --goodput ttft:200 tpot:50 --json "$OUT/serve/random_rate_$rate.json" \
          >"$OUT/serve/random_rate_$rate.txt" 2>&1
        python3 -c "import json; d=json.load(open('$OUT/serve/random_rate_$rate.json')); s=d.get('summary', d); print('rate $rate', {k: round(v, 2) if isinstance(v, float) else v for k, v in s.items() if k in ('completed','failed','request_throughput','output_throughput','median_ttft_ms','median_tpot_ms','p99_ttft_ms','p99_tpot_ms')})" 2>/dev/null || tail -3 "$OUT/serve/random_rate_$rate.txt"
      done
      timeout 200 $B --seed 100 --dataset prefix --prefix-len 1024 --num-prefix-groups 8 --random-input-len 128 \
        --random-output-len 128 --num-prompts 200 --request-rate 16 --label "prefix" \
        --json "$OUT/serve/prefix.json" >"$OUT/serve/prefix.txt" 2>&1
      tail -25 "$OUT/serve/prefix.txt"
      kill -INT $server; wait $server
      python3 -c "
import json
t = [json.loads(l) for l in open('$OUT/serve/trace.jsonl')]
p = sum(x['prompt_tokens'] for x in t); c = sum(x['cached_tokens'] for x in t)
print(f'server: {len(t)} requests, {p} prompt tokens, {c} from the prefix cache ({100 * c / max(p, 1):.1f}%)')"
      python3 bench/plot_serve.py "$OUT"/serve/random_rate_*.json --out-dir "$OUT/serve/plots" >/dev/null 2>&1 ||
        echo "plots failed"
      note "serve: results, plots and the GPU timeline in details.tgz (serve/)"
      ;;
  esac
done
if [ ${#fuzz_pids[@]} -gt 0 ]; then
  wait "${fuzz_pids[@]}"
  for f in "$OUT"/fuzz/*.log; do
    echo "$(basename "$f" .log) $(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$f" | grep -oE '[0-9]+$' | tail -1)"
  done >"$OUT/fuzz_counts.txt"
  found=$(find "$OUT/fuzz" -type f ! -name '*.log' | wc -l)
  note "fuzz: $(awk '{split($1, a, "."); n[a[1]] += $2} END {for (t in n) printf "%s %d  ", t, n[t]}' "$OUT/fuzz_counts.txt")executions; $found findings"
fi
# At most 8 files come back: everything goes into one archive, the key results beside it.
tar -czf "$OUT/details.tgz" -C "$OUT" --exclude=details.tgz . 2>/dev/null
( cd "$OUT" && for f in *; do case $f in details.tgz|hf_parity.json|gtest.log|fuzz_counts.txt) ;; *) rm -rf "$f" ;; esac; done )
echo "---- summary ----"
printf '%s\n' "${summary[@]}"
[ -f "$OUT/hf_parity.log" ] && tail -6 "$OUT/hf_parity.log"
true
