#!/usr/bin/env bash
# Builds the cuda preset on this machine and gathers what the GPU machine needs into device_bundle/
# and device_bundle.tar.xz (git-ignored; the device tool carries the .tar.xz): the pagoda binary, the GPU test binary, and the shared
# libraries they load that a bare Ubuntu image lacks. cuBLAS and the CUDA driver come from the GPU machine.
#   scripts/device/bundle.sh     # then, there: scripts/device/run.sh, carrying device_bundle.tar.xz
# The GPU machine is an H200, so the build is the cuda preset's for sm_90a alone (build/cuda-device; the
# preset itself also builds sm_80): one device architecture to compile instead of two, and a smaller bundle
# (5.4 MB instead of 7.2 on 2026-12-02).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=build/cuda-device
cmake --preset cuda -B "$BUILD" -DCMAKE_CUDA_ARCHITECTURES="${BUNDLE_CUDA_ARCHS:-90a}" >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target pagoda test_cuda
rm -rf device_bundle
mkdir -p device_bundle/bin device_bundle/lib
cp "$BUILD/bin/pagoda" "$(find "$BUILD" -name test_cuda -type f -perm -u+x | head -1)" device_bundle/bin/
strip device_bundle/bin/*
for binary in device_bundle/bin/*; do ldd "$binary"; done | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*|libcuda.so*|libcublas*) ;;
    *) cp -L "$lib" device_bundle/lib/ ;;
  esac
done
git rev-parse HEAD >device_bundle/COMMIT
# The working tree travels too (about 57 MB of it is test data) under a 64 MiB limit: carry it compressed.
# xz -9's 64 MiB dictionary spans both binaries, whose kernels are the same code: 6 MB instead of 9.5 at -6.
tar -cf - device_bundle | xz -9e -T2 >device_bundle.tar.xz
du -sh device_bundle device_bundle.tar.xz
