// The 4-bit decode GEMV at one token (batch-1 decode of a W4 model): quant_gemv.h's entry points send T = 1
// here when the shape allows (quant_gemv_one_token_takes), and take the general kernel otherwise.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "pagoda/kernels/quant_gemv.h"

namespace pagoda::kernels {

// 4-bit codes, K a multiple of 64, groups of 32, 64 or 128 columns or one per row, x 16-byte aligned, and x [K]
// fits the shared memory of a block. PAGODA_QUANT_ONE_TOKEN=0 turns the kernel off (for A/B runs).
bool quant_gemv_one_token_takes(const void* x, const QuantMatrix& w);

// out (or the epilogue's outputs) for one token x [K]: as quant_gemv, quant_gemv_silu, quant_gemv_qkv_rope.
void quant_gemv_one_token(Epilogue epilogue, __nv_bfloat16* out, const QkvRopeOutput& rope, const __nv_bfloat16* x,
                          const QuantMatrix& w, cudaStream_t stream);

}  // namespace pagoda::kernels
