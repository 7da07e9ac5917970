#include "late_writes.h"

#include <cstdint>
#include <stdexcept>

#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/launch.cuh"

namespace pagoda::test {
namespace {

constexpr int kMaxCopies = 8;
struct LateCopies {
  LateCopy copy[kMaxCopies];
  int count;
};

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void late_copies_kernel(LateCopies copies, uint64_t delay_ns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const uint64_t start = global_ns();
  while (global_ns() - start < delay_ns) {
  }
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int c = 0; c < copies.count; ++c) {
    const LateCopy& cp = copies.copy[c];
    const auto* src = static_cast<const unsigned char*>(cp.src);
    auto* dst = static_cast<unsigned char*>(cp.dst);
    const bool aligned = (reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) | cp.bytes) % 16 == 0;
    if (aligned) {
      for (size_t i = first; i < cp.bytes / 16; i += stride)
        reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
    } else {
      for (size_t i = first; i < cp.bytes; i += stride) dst[i] = src[i];
    }
  }
}

}  // namespace

void launch_late_copies(const std::vector<LateCopy>& copies, int delay_us, cudaStream_t stream) {
  if (copies.size() > kMaxCopies) throw std::invalid_argument("launch_late_copies: at most 8 copies");
  LateCopies args{};
  for (size_t i = 0; i < copies.size(); ++i) args.copy[i] = copies[i];
  args.count = static_cast<int>(copies.size());
  // 32 blocks of 256 threads, all resident at once: each triggers the next kernel as its first instruction.
  late_copies_kernel<<<32, 256, 0, stream>>>(args, static_cast<uint64_t>(delay_us) * 1000u);
  PAGODA_CUDA_CHECK(cudaGetLastError());
}

bool library_uses_pdl() { return kernels::pdl_enabled(); }

}  // namespace pagoda::test
