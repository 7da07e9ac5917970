// The decode GEMV of 4- and 8-bit codes at 1 to 8 tokens (batch-1 to batch-8 decode of a W4 or W8 model):
// quant_gemv.h's entry points send such steps here when the shape allows (quant_gemv_few_tokens_takes), and take
// the general kernel otherwise.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "pagoda/kernels/quant_gemv.h"

namespace pagoda::kernels {

constexpr int kQuantGemvFewTokensMax = 8;

// 1 to 8 tokens, 4- or 8-bit integer codes, K a multiple of 64, groups of 32, 64 or 128 columns or one per row, x 16-byte
// aligned, and x [T, K] fits the shared memory of a block beside another (K = 4,096 takes up to 8 tokens, 14,336 up to 2).
// PAGODA_QUANT_FEW_TOKENS=0 turns the kernel off (for A/B runs).
bool quant_gemv_few_tokens_takes(const void* x, const QuantMatrix& w, int num_tokens);

// out (or the epilogue's outputs) for x [T, K]: as quant_gemv, quant_gemv_silu, quant_gemv_qkv_rope.
void quant_gemv_few_tokens(Epilogue epilogue, __nv_bfloat16* out, const QkvRopeOutput& rope, const __nv_bfloat16* x,
                           const QuantMatrix& w, int num_tokens, cudaStream_t stream);

}  // namespace pagoda::kernels
