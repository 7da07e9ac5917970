// cudaMalloc / cudaMallocHost with readable out-of-memory errors.
#include "pagoda/backend/cuda/device_memory.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "pagoda/core/error.h"
#include "pagoda/core/memory_size.h"

namespace pagoda::cuda {

void* DeviceSpace::allocate(size_t bytes) {
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) {
    size_t free = 0, total = 0;
    cudaGetLastError();
    cudaMemGetInfo(&free, &total);
    throw Error(fmt::format("out of GPU memory: asked for {} with {} free of {} ({})",
                            format_memory_size(static_cast<int64_t>(bytes)), format_memory_size(static_cast<int64_t>(free)),
                            format_memory_size(static_cast<int64_t>(total)), cudaGetErrorString(e)));
  }
  return p;
}

void DeviceSpace::release(void* p) { cudaFree(p); }

void* PinnedHostSpace::allocate(size_t bytes) {
  void* p = nullptr;
  if (cudaError_t e = cudaMallocHost(&p, bytes); e != cudaSuccess) {
    cudaGetLastError();
    throw Error(fmt::format("cannot pin {} of host memory: {}", format_memory_size(static_cast<int64_t>(bytes)),
                            cudaGetErrorString(e)));
  }
  return p;
}

void PinnedHostSpace::release(void* p) { cudaFreeHost(p); }

}  // namespace pagoda::cuda
