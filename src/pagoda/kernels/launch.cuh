// Kernel launches with programmatic dependent launch (PDL) on Hopper and newer. A kernel waits
// (griddepcontrol.wait) until the previous grid has completed and its writes are visible, and signals
// (griddepcontrol.launch_dependents) that the next kernel in the stream may be scheduled; once every block
// has signalled, the next kernel's blocks can become resident while this one still runs. Within a CUDA
// graph this hides the launch gap between the ~300 kernels of a decode step. Ordering stays exactly stream
// order: every kernel launched with launch_kernel() must wait before it touches memory that an earlier
// kernel writes, and must not write memory that an earlier kernel may still read before that wait.
//   pdl_grid_sync()           wait, then signal: the usual prologue. The next kernel is scheduled only once
//                             this one's blocks are all running, so at most one kernel runs ahead.
//   pdl_grid_sync_early()     signal, then wait: for the small kernels that precede a skinny GEMM (the
//                             norms, decode attention). The GEMM's blocks are then resident while the small
//                             kernel runs and prefetch their weights into L2 before their own wait (gemv.cu),
//                             so HBM streams weights during the latency-bound kernels. Only there: if every
//                             kernel signalled first, the whole graph would launch ahead and fill the SMs
//                             with blocks waiting for their turn.
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

__device__ __forceinline__ void pdl_grid_sync() {
  pdl_wait();
  pdl_launch_dependents();
}

__device__ __forceinline__ void pdl_grid_sync_early() {
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
