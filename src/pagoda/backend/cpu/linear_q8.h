// Q8_0 weights times fp32 activations in int8 arithmetic (see linear_q8.cpp).
#pragma once

#include <cstdint>

namespace pagoda::cpu {

// out [num_tokens, n] = x [num_tokens, k] · w [n, k]^T, w in Q8_0 blocks, k a multiple of 32. The
// activations are quantized to Q8_0 first (llama.cpp's scheme), so results differ from the fp32
// product by that quantization.
void linear_q8_0(float* out, const float* x, int64_t num_tokens, const void* w, int64_t n, int64_t k);

}  // namespace pagoda::cpu
