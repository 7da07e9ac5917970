// 4-bit weights times int8 activation blocks in integer arithmetic (ActivationQuant::kInt8Block; see
// linear_w4_int8.cpp).
#pragma once

#include <cstdint>

#include "pagoda/loader/model_weights.h"

namespace pagoda::cpu {

// A 4-bit weight's arrays, as the integer kernels read them.
struct W4Rows {
  const uint8_t* codes;  // [N, K / 2], low nibble first
  const float* scales;   // [N, groups]
  const uint8_t* zeros;  // [N, groups], or null with offsets
  const float* offsets;  // [N, groups], or null with zeros
  int64_t k, groups, group_size;
};

// Whether linear_w4_int8 takes `w`: an int4-group weight without act-order (g_idx), whose groups and rows
// are whole blocks of 32.
bool linear_w4_int8_supported(const Weight& w);

// out [num_tokens, N] = x [num_tokens, K] · w [N, K]^T with x quantized to Q8_0 blocks first (llama.cpp's
// scheme for its 4-bit files): per block, the int32 sums of code x int8 products, then the block's scales in
// fp32. Every (row, token) dot product is the same whatever the batch.
void linear_w4_int8(float* out, const float* x, int64_t num_tokens, const Weight& w);

}  // namespace pagoda::cpu
