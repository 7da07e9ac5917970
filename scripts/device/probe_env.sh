# Sourced by a probe script on the GPU machine (run from the repository root, the bundle carried):
#   source scripts/device/probe_env.sh
# unpacks device_bundle.tar.xz, sets up its libraries, and gives the probe:
#   R     a folder under $OUT for its output (fetched back as $OUT/results.tar.xz)
#   save  packs R into $OUT/results.tar.xz (call it after each stage: a timed-out probe keeps what it saved)
#   P, T  the pagoda and test_cuda binaries
# It records the device's name (R/device.txt) and the bundle's commit (R/commit.txt).
export OUT=${OUT:-/tmp/o}
tar -xJf device_bundle.tar.xz
scripts/device/run.sh unpack-only >/dev/null 2>&1
R=$OUT/r
mkdir -p "$R"
save() { tar -cJf "$OUT/results.tar.xz" -C "$OUT" r; }
export LD_LIBRARY_PATH="$PWD/device_bundle/lib:$(python3 -c 'import nvidia.cublas,os;print(os.path.join(list(nvidia.cublas.__path__)[0],"lib"))' 2>/dev/null):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
P=device_bundle/bin/pagoda
T=device_bundle/bin/test_cuda
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$R/device.txt"
cp device_bundle/COMMIT "$R/commit.txt"
# gptq_copies DIR_PREFIX: copies of tests/data/models/llama-3-8b as DIR_PREFIX-act and DIR_PREFIX-plain, whose
# config.json asks for GPTQ W4 g128 with desc_act true and false (for --load-format dummy --quantization gptq).
gptq_copies() {
  local d
  for d in act plain; do
    mkdir -p "$1-$d" && cp tests/data/models/llama-3-8b/* "$1-$d/"
    python3 - "$1-$d/config.json" "$d" <<'PY'
import json, sys
path, kind = sys.argv[1], sys.argv[2]
c = json.load(open(path))
c["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": kind == "act"}
json.dump(c, open(path, "w"))
PY
  done
}
# kv_flood NAME PAGODA TIMEOUT BENCH_ARGS...: issue 16's multi-tenant workload against one fresh `pagoda serve` of the
# Llama-3-8B shape (dummy weights, 768 KV blocks of 16 tokens, 64 sequences, 8 GiB host tier; LRU-K + host tier, fair
# policy) through scripts/kv_policy_bench.sh, into R/kv_NAME; SERVE_EXTRA adds serve arguments. PAGODA may be
# $PAGODA_DEBUG (the binary at --log-level debug: each step's line, kept in the server's log).
MT_ARGS="--prefix-len 1024 --random-input-len 128 --random-output-len 64 --ignore-eos"
PAGODA_DEBUG=/tmp/pagoda-debug
printf '#!/usr/bin/env bash\nexec %s --log-level debug "$@"\n' "$PWD/$P" >"$PAGODA_DEBUG" && chmod +x "$PAGODA_DEBUG"
kv_flood() {
  local name=$1 pagoda=$2 limit=$3
  shift 3
  OUT_DIR="$R/kv_$name" PAGODA="$pagoda" PORT=18795 HOST_MEMORY=8GiB POLICIES="lru-k+host@fair" \
    SERVE_ARGS="--model tests/data/models/llama-3-8b --load-format dummy --device cuda --max-model-len 4096 --kv-cache-memory 1536MiB --max-num-seqs 64 ${SERVE_EXTRA:-}" \
    BENCH_ARGS="$*" timeout "$limit" scripts/kv_policy_bench.sh >"$R/kv_$name.txt" 2>&1
  echo "kv $name rc=$?: $(tail -1 "$R/kv_$name.txt")"
  save
}
