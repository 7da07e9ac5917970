// What the quantized GEMM's Hopper forms (quant_gemm_wgmma.cu, quant_gemm_ws.cu) share: wgmma's shared-memory
// descriptor for the 128-byte swizzle, its fence / commit / wait, and the bf16 values (q - z) s or q s - m rounded as
// dequantize_tiles_bf16 rounds them. The wgmma instructions are sm_90a PTX: other targets compile these empty (the
// kernels run on Hopper only, quant_gemm_wgmma_available()).
#pragma once

#include <cstdint>

#include "pagoda/kernels/quant_codes.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define PAGODA_WGMMA 1
#endif

namespace pagoda::kernels {
namespace {

// wgmma's shared-memory matrix descriptor for K-major rows of 128 bytes in the 128-byte swizzle: start address,
// 8-row atoms 1,024 bytes apart (the leading offset is unused in this mode).
__device__ __forceinline__ uint64_t swizzled_rows_descriptor(uint32_t shared) {
  return static_cast<uint64_t>((shared & 0x3ffffu) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}

__device__ __forceinline__ void wgmma_fence() {
#ifdef PAGODA_WGMMA
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#ifdef PAGODA_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifdef PAGODA_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}
// Keeps the compiler from moving reads or writes of the accumulators across a wgmma wait.
template <int N>
__device__ __forceinline__ void fence_accumulators(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i]));
}

// A bf16x2 of exact (q - z) or q, times the row's scale (minus its offset) in fp32 and rounded to bf16: the values of
// dequantize_tiles_bf16.
template <bool kOffsets>
__device__ __forceinline__ uint32_t scaled(uint32_t v, float s, float m) {
  float lo = __uint_as_float(v << 16), hi = __uint_as_float(v & 0xffff0000u);
  if constexpr (kOffsets) {
    lo = __fsub_rn(__fmul_rn(lo, s), m);
    hi = __fsub_rn(__fmul_rn(hi, s), m);
  } else {
    lo = __fmul_rn(lo, s);
    hi = __fmul_rn(hi, s);
  }
  return pack_bf16x2(lo, hi);
}

}  // namespace
}  // namespace pagoda::kernels
