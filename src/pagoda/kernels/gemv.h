// Skinny GEMM for decode: out [T, N] = x [T, K] · w [N, K]^T with T <= kSkinnyGemmMaxTokens, bf16 in and
// out, fp32 accumulation. Memory-bound: every weight byte is read once per call with 16-byte loads, so a
// batch-1 decode step runs near the HBM roofline. Larger T goes to cuBLAS.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace pagoda::kernels {

constexpr int kSkinnyGemmMaxTokens = 8;

// Whether skinny_gemm supports this shape (K a multiple of 8, pointers 16-byte aligned, T in range).
bool skinny_gemm_supported(const void* x, const void* w, int num_tokens, int n, int k);

void skinny_gemm(__nv_bfloat16* out, const __nv_bfloat16* x, const __nv_bfloat16* w, int num_tokens, int n, int k,
                 cudaStream_t stream);

}  // namespace pagoda::kernels
