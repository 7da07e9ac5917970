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
