// Decode-sized matrix products that convert weights in registers (see linear_direct.cpp).
#pragma once

#include <cstdint>

#include "pagoda/core/dtype.h"

namespace pagoda::cpu {

inline constexpr int64_t kMaxDirectTokens = 4;

// out [num_tokens, n] = x [num_tokens, k] · w [n, k]^T for 1..kMaxDirectTokens tokens. Returns false
// (doing nothing) for other token counts or dtypes.
bool linear_direct_f32(float* out, const float* x, int64_t num_tokens, const void* w, DType w_dtype, int64_t n,
                       int64_t k);

}  // namespace pagoda::cpu
