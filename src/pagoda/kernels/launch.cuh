// Kernel launches with programmatic dependent launch (PDL) on Hopper and newer: the next kernel in the
// stream is scheduled while this one is still running, its blocks wait at their first statement
// (pdl_grid_sync) until the previous grid has completed and its writes are visible, and then signal that
// the kernel after them may be scheduled. Within a CUDA graph this hides most of the launch gap between
// the ~300 kernels of a decode step. Ordering is exactly stream order: every kernel launched with
// launch_kernel() must call pdl_grid_sync() before it touches global memory, on every path. The one
// exception is memory that no kernel of the stream writes after it was uploaded (weights), and memory the
// kernel before this one does not write (when this kernel starts, every kernel before that one has
// finished): a kernel may read those before its wait, to overlap the loads with the previous kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>

#include "pagoda/core/env_knob.h"
#include "pagoda/kernels/cuda_check.h"

namespace pagoda::kernels {

__device__ __forceinline__ void pdl_grid_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// pdl_grid_sync's two steps the other way round, for a kernel whose successor reads nothing before its own wait
// but weights (gather_columns, before a linear): the successor is scheduled at once, so its weight loads overlap
// the kernel before this one, as they would without this kernel in between. The successor's blocks still wait for
// this grid, which ends only after the one before it. A kernel after one of these may start while the kernel
// two before it runs: it must read only weights before its wait.
__device__ __forceinline__ void pdl_launch_dependents_then_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// The current device's compute capability as major * 10 + minor (cached; 0 when it cannot be read): which of our
// kernels it runs (PDL from 90, FP8 MMAs from 89, wgmma on 90 exactly: sm_90a code).
inline int compute_capability() {
  static const int capability = [] {
    int device = 0, major = 0, minor = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return major * 10 + minor;
  }();
  return capability;
}

// PDL on the current device: compute capability 9.0 or newer, unless PAGODA_NO_PDL=1 (for comparisons).
inline bool pdl_enabled() {
  static const bool enabled = !env_flag("PAGODA_NO_PDL", false) && compute_capability() >= 90;
  return enabled;
}

// The current device's SM count (cached; 132 when it cannot be read).
inline int sm_count() {
  static const int count = [] {
    int device = 0, n = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || n <= 0) {
      cudaGetLastError();
      return 132;
    }
    return n;
  }();
  return count;
}

// How many slices of K the decode GEMVs (quant_gemv.cu, fp8_linear.cu) cut each tile into: doubling, up to
// one warp of the block per slice, while the grid of `tiles` x splits warps still fits in one wave of resident
// blocks (a second, partial wave costs more than the shorter slices save: a 6,144-row W4 QKV went from 1.45
// waves to one, 10.65 -> 9.40 us) and each slice keeps at least `min_chunks` of the `chunks` along K.
inline int one_wave_splits(int64_t tiles, int64_t chunks, int warps_per_block, int blocks_per_sm, int min_chunks) {
  const int64_t resident_warps = static_cast<int64_t>(sm_count()) * blocks_per_sm * warps_per_block;
  int splits = 1;
  while (splits < warps_per_block && tiles * splits * 2 <= resident_warps && chunks / (2 * splits) >= min_chunks)
    splits *= 2;
  return splits;
}

// kernel<<<grid, block, smem, stream>>>(args...), with PDL where enabled, error-checked under `name`.
template <typename... Params, typename... Args>
void launch_kernel(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                   cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = pdl_enabled() ? 1 : 0;
  cuda_check(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...), name, __FILE__, __LINE__);
}

}  // namespace pagoda::kernels
