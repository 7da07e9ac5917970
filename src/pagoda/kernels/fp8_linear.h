// FP8 W8A8 linears (a kFp8Channel Weight whose `activations` is set: core/quant_scheme.h). The weights are
// e4m3 rows [N, K] in the fused orders of backend/cuda/weight_upload.cpp with one fp32 scale per row; the
// activations become e4m3 codes with one scale per token (quantize_fp8_rows), and the product is
// sum(codes_x * codes_w) * s_x * s_w in fp32:
//  - up to kFp8GemvMaxTokens tokens (decode): fp8_gemv*, mma.sync m16n8k32 e4m3 on the tensor cores with no
//    conversion of either operand, and the same three epilogues as the bf16 and quantized GEMVs (gemv.h);
//  - more: cuBLASLt's FP8 GEMM (backend/cuda/fp8_gemm.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "pagoda/kernels/gemv.h"

namespace pagoda::kernels {

constexpr int kFp8GemvMaxTokens = 16;
constexpr int kFp8RowAlignment = 16;  // rows are allocated to a multiple of this (zero codes and scales)

// An FP8 weight on the device.
struct Fp8Rows {
  const uint8_t* codes = nullptr;  // [rows rounded up to kFp8RowAlignment, k] e4m3, 16-byte aligned
  const float* scales = nullptr;   // [rows rounded up] fp32
  int n = 0, k = 0;                // k a multiple of 16
};

// The activations of a W8A8 linear as FP8.
struct Fp8Activations {
  uint8_t* codes = nullptr;  // [T, k] e4m3, 16-byte aligned
  float* scales = nullptr;   // [T]
};

// Whether this GPU has FP8 tensor cores (compute capability 8.9 or newer); without them W8A8 weights go up in
// the weight-only tile layout (quant_gemv.h).
bool fp8_w8a8_supported();

// codes = e4m3(x * (1 / s)) (round to nearest even, saturating) and scales = s per row of x [T, K] (K a
// multiple of 16): s = static_scale when it is positive, else max(amax(|row|) / 448, 1 / (448 * 512)) (as
// cpu::quantize_activations_fp8). Tried and not kept: the quantization inside the GEMV for 1-2 tokens (each
// block finding the amax): 1.5-2.5 us less per call alone, no faster in a decode graph (docs/PERFORMANCE.md).
void quantize_fp8_rows(const Fp8Activations& out, const __nv_bfloat16* x, int num_tokens, int k, float static_scale,
                       cudaStream_t stream);

// out [T, N] *= row_scales[n] * token_scales[t], in place (the cuBLASLt GEMM's unscaled bf16 sums).
void scale_fp8_products(__nv_bfloat16* out, const float* row_scales, const float* token_scales, int num_tokens, int n,
                        cudaStream_t stream);

// Whether the GEMV takes this shape (T in range, K a multiple of 16).
bool fp8_gemv_supported(const Fp8Rows& w, int num_tokens);

// out [T, N] bf16 = the products, scaled.
void fp8_gemv(__nv_bfloat16* out, const Fp8Activations& x, const Fp8Rows& w, int num_tokens, cudaStream_t stream);
// Rows 2j, 2j + 1 are gate_j, up_j: out [T, N / 2] (gemv.h: skinny_gemm_silu).
void fp8_gemv_silu(__nv_bfloat16* out, const Fp8Activations& x, const Fp8Rows& w_gate_up, int num_tokens,
                   cudaStream_t stream);
// QKV with RoPE and the KV-cache store (gemv.h: skinny_gemm_qkv_rope).
void fp8_gemv_qkv_rope(const QkvRopeOutput& out, const Fp8Activations& x, const Fp8Rows& w_qkv, int num_tokens,
                       cudaStream_t stream);

}  // namespace pagoda::kernels
