// Reference kernels for quantized linear weights (QuantScheme::kInt4Group, kInt8Channel, kFp8Channel): rows
// are dequantized to fp32 and multiplied in fp32 (see linear_quant.cpp).
#pragma once

#include <cstdint>

#include "pagoda/loader/model_weights.h"

namespace pagoda::cpu {

// out [count, K] = rows [row, row + count) of the quantized `w` as fp32, one function per scheme behind it.
// The CUDA backend uploads these values as bf16 until it has kernels of its own for the schemes.
void dequantize_rows(const Weight& w, int64_t row, int64_t count, float* out);

// out [num_tokens, N] = x [num_tokens, K] · dequantize(w) [N, K]^T for a quantized `w`. OpenMP over chunks of
// rows; every (row, token) dot product is the same whatever the batch.
void linear_quant_f32(float* out, const float* x, int64_t num_tokens, const Weight& w);

}  // namespace pagoda::cpu
