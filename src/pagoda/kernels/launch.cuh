// Kernel launches with programmatic dependent launch (PDL) on Hopper and newer. Every kernel first
// signals that the next kernel in the stream may be scheduled (griddepcontrol.launch_dependents), then
// waits until the previous grid has completed and its writes are visible (griddepcontrol.wait). So while
// kernel N runs, kernel N + 1's blocks can already be resident (once every block of N has started), and
// do work that reads nothing N writes: the skinny GEMM prefetches its weights into L2 there
// (pdl_launch_dependents / pdl_wait, see gemv.cu). Within a CUDA graph this hides the launch gap between
// the ~300 kernels of a decode step and keeps HBM busy during the small ones. Ordering stays exactly
// stream order, transitively (N + 1 waits for N, which waited for N - 1): every kernel launched with
// launch_kernel() must call pdl_grid_sync() (or pdl_wait()) before it touches memory that an earlier
// kernel writes, and must not write memory that an earlier kernel may still read before that wait.
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>

#include "pagoda/kernels/cuda_check.h"

namespace pagoda::kernels {

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// The usual prologue: let the next kernel be scheduled, then wait for the previous one.
__device__ __forceinline__ void pdl_grid_sync() {
  pdl_launch_dependents();
  pdl_wait();
}

// PDL on the current device: compute capability 9.0 or newer, unless PAGODA_NO_PDL=1 (for comparisons).
inline bool pdl_enabled() {
  static const bool enabled = [] {
    const char* off = std::getenv("PAGODA_NO_PDL");
    if (off && *off == '1') return false;
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return major >= 9;
  }();
  return enabled;
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
