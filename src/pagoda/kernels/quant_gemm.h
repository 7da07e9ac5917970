// The quantized GEMM for steps of many tokens (batched decode past the GEMV's 40 tokens, short prompts):
// out [T, N] = x [T, K] · W [N, K]^T, x and out bf16, W in the tile layout of backend/mma_layout/quant_tiles.h.
// The codes become bf16 in registers as in the GEMV (quant_codes.cuh) and are multiplied on the tensor cores
// (mma.sync m16n8k16, fp32 sums scaled once per group), 64 tokens at a time from shared memory: the weights are
// read once per 64 tokens and never copied to bf16. Past quant_gemm_max_tokens() a bf16 copy of the weight for
// cuBLAS is faster (the copy is small beside a long prompt's GEMM, and cuBLAS's wgmma beats mma.sync there).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "pagoda/kernels/quant_gemv.h"

namespace pagoda::kernels {

// Steps of up to this many tokens take the GEMM (docs/PERFORMANCE.md has the crossover against the bf16 copy);
// PAGODA_QUANT_GEMM_MAX_TOKENS overrides it (0 turns the GEMM off, for A/B runs).
constexpr int kQuantGemmMaxTokens = 192;
int quant_gemm_max_tokens();

// Whether the GEMM takes this step: 1 to quant_gemm_max_tokens() tokens, the zeros form (the offsets form of
// GGUF's k-quants takes the bf16 copy), K a multiple of 16 and groups of whole k-steps, x 16-byte aligned.
bool quant_gemm_supported(const void* x, const QuantMatrix& w, int num_tokens);

// Device memory quant_gemm needs beside out (fp32 partial sums when K is cut into slices to fill the GPU; 0 when
// it is not). The slices depend on N, K and the number of 64-token blocks only.
size_t quant_gemm_workspace_bytes(const QuantMatrix& w, int num_tokens);

// out [T, N]; workspace: quant_gemm_workspace_bytes(w, num_tokens) bytes, 16-byte aligned (or null when 0).
void quant_gemm(__nv_bfloat16* out, const __nv_bfloat16* x, const QuantMatrix& w, int num_tokens, void* workspace,
                cudaStream_t stream);

}  // namespace pagoda::kernels
