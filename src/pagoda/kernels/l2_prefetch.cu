// l2_prefetch.h: one bulk prefetch per thread over a slice of the range, spread over many blocks so that
// many SMs' copy engines issue at once.
#include "pagoda/kernels/l2_prefetch.h"

#include <algorithm>

#include "pagoda/kernels/launch.cuh"

namespace pagoda::kernels {
namespace {

constexpr int kBlocks = 128;
constexpr int kThreads = 32;

__global__ void l2_prefetch_kernel(const char* p, int64_t bytes, int64_t slice) {
  pdl_grid_sync();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int64_t begin = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * slice;
  if (begin >= bytes) return;
  const uint32_t size = static_cast<uint32_t>(std::min<int64_t>(slice, bytes - begin));
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + begin), "r"(size) : "memory");
#endif
}

}  // namespace

void l2_prefetch(const void* p, int64_t bytes, cudaStream_t stream) {
  bytes &= ~int64_t{15};
  if (bytes <= 0 || !pdl_enabled()) return;  // pdl_enabled: sm_90 or newer
  const int64_t threads = int64_t{kBlocks} * kThreads;
  const int64_t slice = ((bytes + threads - 1) / threads + 15) & ~int64_t{15};
  const int64_t blocks = std::min<int64_t>(kBlocks, (bytes + slice * kThreads - 1) / (slice * kThreads));
  launch_kernel("l2_prefetch", l2_prefetch_kernel, static_cast<unsigned>(blocks), kThreads, 0, stream,
                static_cast<const char*>(p), bytes, slice);
}

}  // namespace pagoda::kernels
