// The decode GEMV of 4- and 8-bit codes at 1 to 8 tokens (batch-1 to batch-8 decode of a W4 or W8 model):
// quant_gemv.h's entry points send such steps here when the shape allows (quant_gemv_few_tokens_takes), and take
// the general kernel otherwise.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "pagoda/kernels/quant_gemv.h"

namespace pagoda::kernels {

constexpr int kQuantGemvFewTokensMax = 8;

// The residual norm between two of these GEMVs, done in their epilogue and prologue instead of a kernel of its own
// (CudaOps::linear_add_rms_norm with a reader; a norm launch cost about 2 us of a W4 batch-1 step's chain, 64 a
// step). The producer (an output projection) adds its outputs into the residual stream and writes, per token, each
// 16-row tile's sum of squares of the new residual; the reader's blocks load the residual instead of x and
// normalise it as they stage it: x = bf16(bf16(r * inv) * gamma), inv = rsqrt(sum / K + eps), as add_rms_norm.
struct ResidualAdd {  // the producer's side
  __nv_bfloat16* residual = nullptr;  // [T, N]: r = bf16(r + bf16(product)), in place
  float* tile_squares = nullptr;      // [T, ceil(N / 16)]: each tile's sum of r^2 (fp32, a fixed order)
};
struct NormedInput {  // the reader's side: its x is rms_norm(residual) * gamma
  const __nv_bfloat16* residual = nullptr;  // [T, K]
  const float* tile_squares = nullptr;      // [T, count]
  const __nv_bfloat16* gamma = nullptr;     // [K]
  int count = 0;                            // tiles per token in tile_squares
  float eps = 0.0f;
};

// 1 to 8 tokens, 4- or 8-bit integer codes, K a multiple of 64, groups of 32, 64 or 128 columns or one per row, x 16-byte
// aligned, and x [T, K] fits the shared memory of a block beside another (K = 4,096 takes up to 8 tokens, 14,336 up to 2).
// PAGODA_QUANT_FEW_TOKENS=0 turns the kernel off (for A/B runs).
bool quant_gemv_few_tokens_takes(const void* x, const QuantMatrix& w, int num_tokens);

// out (or the epilogue's outputs) for x [T, K]: as quant_gemv, quant_gemv_silu, quant_gemv_qkv_rope. With `normed`
// (residual not null), x is that norm's output and is not read; with `add` (kPlain only), the products go into
// add.residual instead of out (ResidualAdd).
void quant_gemv_few_tokens(Epilogue epilogue, __nv_bfloat16* out, const QkvRopeOutput& rope, const __nv_bfloat16* x,
                           const QuantMatrix& w, int num_tokens, cudaStream_t stream, const NormedInput& normed = {},
                           const ResidualAdd& add = {});

}  // namespace pagoda::kernels
