// Reference kernels for quantized linear weights (QuantScheme::kInt4Group, kInt8Channel, kFp8Channel): rows
// are dequantized to fp32 and multiplied in fp32 (see linear_quant.cpp).
#pragma once

#include <cstdint>

#include "pagoda/loader/model_weights.h"

namespace pagoda::cpu {

// out [count, K] = rows [row, row + count) of the quantized `w` as fp32, one function per scheme behind it.
// The CUDA backend uploads these values as bf16 until it has kernels of its own for the schemes.
void dequantize_rows(const Weight& w, int64_t row, int64_t count, float* out);

// The smallest dynamic FP8 activation scale (vLLM's min_scaling_factor): an all-zero row still divides by it.
constexpr float kMinFp8ActivationScale = 1.0f / (448.0f * 512.0f);

// The scale of one row of K activations under `a` (kFp8PerToken: max(amax / 448, the minimum); kFp8Static:
// input_scale), and out [T, K] = x's FP8 values: e4m3(x * (1 / s)) * s (the reciprocal, as vLLM's quantizers),
// e4m3 rounding to nearest even and saturating (core/quant_scheme.h, ActivationQuant). The reference for the
// GPU's quantize kernels.
float fp8_activation_scale(const float* x, int64_t k, ActivationQuant a, float input_scale);
void quantize_activations_fp8(const float* x, int64_t num_tokens, int64_t k, ActivationQuant a, float input_scale,
                              float* out);

// out [num_tokens, N] = x [num_tokens, K] · dequantize(w) [N, K]^T for a quantized `w`, its inputs first
// quantized when w.activations says so (W8A8; int8 blocks for GGUF 4-bit weights: linear_w4_int8.h). OpenMP over chunks of rows; every (row, token) dot product is
// the same whatever the batch.
void linear_quant_f32(float* out, const float* x, int64_t num_tokens, const Weight& w);

}  // namespace pagoda::cpu
