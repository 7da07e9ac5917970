#!/usr/bin/env bash
# Packs the libFuzzer targets (built by `make fuzz`'s preset here) for a fuzzing campaign on the GPU machine's
# host cores: build/devfuzz/fuzzbins.tar.xz, debug info stripped (crashes are re-run here, symbolized, from
# the inputs that come back). Carry build/devfuzz with device_bundle.tar.xz and run `scripts/device/run.sh fuzz`.
#   scripts/device/fuzz_bundle.sh [TARGET...]   (default: every target)
set -euo pipefail
cd "$(dirname "$0")/../.."
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_safetensors fuzz_gguf fuzz_tokenizer_json fuzz_chat_template fuzz_http_request fuzz_openai_request)
cmake --preset fuzz >/dev/null
cmake --build build/fuzz -j"$(nproc)" --target "${targets[@]}"
rm -rf build/devfuzz && mkdir -p build/devfuzz/bin
for t in "${targets[@]}"; do strip --strip-debug -o "build/devfuzz/bin/$t" "build/fuzz/fuzz/$t"; done
# The shared libraries a bare image lacks (fmt, spdlog, pcre2, ...), so a fuzz-only run needs no device bundle.
mkdir -p build/devfuzz/bin/lib
for t in "${targets[@]}"; do ldd "build/fuzz/fuzz/$t"; done | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*) ;;
    *) cp -L "$lib" build/devfuzz/bin/lib/ ;;
  esac
done
tar -cJf build/devfuzz/fuzzbins.tar.xz -C build/devfuzz/bin . && rm -rf build/devfuzz/bin
du -sh build/devfuzz/fuzzbins.tar.xz
