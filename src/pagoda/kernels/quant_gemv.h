// Decode GEMMs with quantized weights: out [T, N] = x [T, K] · W [N, K]^T for T <= kQuantGemvMaxTokens, x and
// out bf16, W in the tile layout of backend/mma_layout/quant_tiles.h (4-bit, int8 or FP8 codes with fp32
// params per row and group). The codes are turned into bf16 in registers and multiplied on the tensor cores
// (mma.sync m16n8k16, fp32 accumulation); each group's sums are scaled once in fp32. Memory-bound like the
// bf16 skinny GEMM (gemv.h), with the same three epilogues. Larger T: quant_gemm.h (tensor-core GEMM, up to a few
// hundred tokens), then dequantize_tiles_bf16 into a scratch matrix for cuBLAS.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "pagoda/backend/mma_layout/quant_tiles_shape.h"
#include "pagoda/kernels/gemv.h"

namespace pagoda::kernels {

// Up to 16 tokens in one pass; up to 40 in passes of 16, each reading the weights again. On the H200 (Llama-3-8B,
// W4 g128) a pass of 16 takes about 115 us a layer and the bf16 scratch path about 330 (its 6.6 ms a step more
// than bf16 at batch 64, over 32 layers, plus the GEMM): three passes still cost less (docs/PERFORMANCE.md).
constexpr int kQuantGemvMaxTokens = 40;

// A packed matrix on the device.
struct QuantMatrix {
  const void* codes = nullptr;   // QuantTilesShape::code_bytes(), 16-byte aligned
  const float* params = nullptr;  // QuantTilesShape::param_floats(), 16-byte aligned
  QuantTilesShape shape;
};

// Whether the kernels take this shape (T in range, x 8-byte aligned).
bool quant_gemv_supported(const void* x, const QuantMatrix& w, int num_tokens);

void quant_gemv(__nv_bfloat16* out, const __nv_bfloat16* x, const QuantMatrix& w, int num_tokens, cudaStream_t stream);
// The SwiGLU form: rows 2j, 2j + 1 of w are gate_j, up_j; out [T, N / 2] (gemv.h: skinny_gemm_silu).
void quant_gemv_silu(__nv_bfloat16* out, const __nv_bfloat16* x, const QuantMatrix& w_gate_up, int num_tokens,
                     cudaStream_t stream);
// The QKV form with RoPE and the KV-cache store (gemv.h: skinny_gemm_qkv_rope).
void quant_gemv_qkv_rope(const QkvRopeOutput& out, const __nv_bfloat16* x, const QuantMatrix& w_qkv, int num_tokens,
                         cudaStream_t stream);

// out [N, K] bf16 (row-major, rows in the matrix's order) = the values of w, rounded from fp32.
void dequantize_tiles_bf16(__nv_bfloat16* out, const QuantMatrix& w, cudaStream_t stream);

}  // namespace pagoda::kernels
