// L2 prefetch of a weight (decode steps): asks the L2 cache to bring bytes in from HBM while the GPU runs
// work that moves little memory (attention, a norm), so that the GEMM after it reads them from L2.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pagoda::kernels {

// Prefetches [p, p + bytes) into L2 without waiting for it: TMA bulk prefetches (sm_90 and newer; nothing
// elsewhere). The kernel takes its place in the stream like any other (PDL wait first) and returns as soon
// as the prefetches are issued. p must be 16-byte aligned; bytes is rounded down to a multiple of 16.
void l2_prefetch(const void* p, int64_t bytes, cudaStream_t stream);

}  // namespace pagoda::kernels
