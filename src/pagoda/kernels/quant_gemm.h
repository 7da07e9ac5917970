// The quantized GEMM for steps of many tokens (batched decode past the GEMV's 40 tokens, prompts):
// out [T, N] = x [T, K] · W [N, K]^T, x and out bf16, W in the tile layout of backend/mma_layout/quant_tiles.h.
// The codes become bf16 in registers as in the GEMV (quant_codes.cuh) and are multiplied on the tensor cores from
// registers, the tokens' x from shared memory: the weights are read once per block of tokens and never copied to
// bf16. Two forms:
// - quant_gemm (any sm_80+ GPU): mma.sync m16n8k16, 64 tokens a block, fp32 sums scaled once per group, the zeros
//   form only; up to quant_gemm_max_tokens() (past it the bf16 copy of the weight for cuBLAS is faster).
// - quant_gemm_wgmma (Hopper, sm_90a): wgmma m64n128k16, 128 tokens a block, the weights' values (q - z) s or
//   q s - m rounded to bf16 in registers as the bf16 copy rounds them; both forms of params, any number of tokens,
//   taken for 65 to 128 (one of its blocks against two of the mma.sync form's; docs/PERFORMANCE.md).
// - quant_gemm_ws (Hopper): warp-specialized, 256 tokens a block, a warpgroup converting the codes into bf16 tiles in
//   shared memory beside two multiplying them; taken for 129 to 512 tokens (past that the bf16 copy wins again).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

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

// The Hopper form (quant_gemm_wgmma.cu). Available on compute capability 9.0 only; supported for the zeros and the
// offsets forms, K a multiple of 16, groups of whole k-steps, x 16-byte aligned, any number of tokens.
bool quant_gemm_wgmma_available();
bool quant_gemm_wgmma_supported(const void* x, const QuantMatrix& w, int num_tokens);
// Steps of kQuantGemmWgmmaMinTokens to kQuantGemmWgmmaMaxTokens tokens take the Hopper form where it is available
// (PAGODA_QUANT_WGMMA_MIN_TOKENS overrides the first; 0 turns the form off).
constexpr int kQuantGemmWgmmaMinTokens = 65;
constexpr int kQuantGemmWgmmaMaxTokens = 128;
int quant_gemm_wgmma_min_tokens();
// Whether a step takes the Hopper form: its token count in that band, and supported.
bool quant_gemm_wgmma_takes(const void* x, const QuantMatrix& w, int num_tokens);
size_t quant_gemm_wgmma_workspace_bytes(const QuantMatrix& w, int num_tokens);
void quant_gemm_wgmma(__nv_bfloat16* out, const __nv_bfloat16* x, const QuantMatrix& w, int num_tokens, void* workspace,
                      cudaStream_t stream);

// The warp-specialized Hopper form (quant_gemm_ws.cu): 256 tokens a block, a warpgroup converting the codes to bf16
// tiles in shared memory for two that multiply them (wgmma with both operands in shared memory); the same support as
// quant_gemm_wgmma, and its values but for 4-bit zero-point scales of more than 16 significant bits (quant_gemm_ws.cu).
bool quant_gemm_ws_supported(const void* x, const QuantMatrix& w, int num_tokens);
size_t quant_gemm_ws_workspace_bytes(const QuantMatrix& w, int num_tokens);
// Steps of kQuantGemmWsMinTokens to kQuantGemmWsMaxTokens tokens take it where it is supported (Hopper): there it is
// faster than the other forms and the bf16 copy (docs/PERFORMANCE.md); PAGODA_QUANT_WS_MIN_TOKENS and
// PAGODA_QUANT_WS_MAX_TOKENS override the band (a minimum of 0 turns the form off).
constexpr int kQuantGemmWsMinTokens = 129;
constexpr int kQuantGemmWsMaxTokens = 512;
bool quant_gemm_ws_takes(const void* x, const QuantMatrix& w, int num_tokens);
void quant_gemm_ws(__nv_bfloat16* out, const __nv_bfloat16* x, const QuantMatrix& w, int num_tokens, void* workspace,
                   cudaStream_t stream);

// out [count] = the sum of fp32 partial sums [slices][count] in slice order (both forms' K slices).
void add_k_slices(__nv_bfloat16* out, const float* partial, int64_t count, int slices, cudaStream_t stream);

}  // namespace pagoda::kernels
