// Q8_0 weights times fp32 activations in int8 arithmetic (see linear_q8.cpp).
#pragma once

#include <cstdint>
#include <vector>

namespace pagoda::cpu {

// Activations as llama.cpp's Q8_0 blocks: per row, per block of 32 values, scale d = amax / 127 and values
// round(x / d) (0 where d = 0). Shared by the Q8_0 and the W4 integer products; the W4 ones also need each
// block's 8 lane sums (values 4l..4l+3 added), for the zero points and offsets.
struct Q8Blocks {
  std::vector<float> scales;      // [num_tokens, k / 32]
  std::vector<int8_t> values;     // [num_tokens, k]
  std::vector<int32_t> lane_sums; // [num_tokens, k / 32, 8], when asked for
};
void quantize_q8_blocks(const float* x, int64_t num_tokens, int64_t k, Q8Blocks& q, bool with_lane_sums = false);

// Q8_0 activations two tokens at a time, block by block, as the AVX512-VNNI kernels read them:
//   values [pairs, k / 32, 64] uint8: the first token's 32 int8 values, then the second's, each plus 128
//   scales [pairs, k / 32, 16] fp32: the first token's block scale 8 times, then the second's
//   lane_sums [pairs, k / 32, 16] fp32, when q has them: each token's 8 lane sums
// An odd last token is paired with zeros.
struct Q8TokenPairs {
  const uint8_t* values = nullptr;
  const float* scales = nullptr;
  const float* lane_sums = nullptr;
  int64_t num_tokens = 0;
};
struct Q8PairedBlocks {  // the storage behind a Q8TokenPairs
  std::vector<uint8_t> values;
  std::vector<float> scales, lane_sums;
};
Q8TokenPairs pair_q8_blocks(const Q8Blocks& q, int64_t num_tokens, int64_t k, Q8PairedBlocks& paired);

// out [num_tokens, n] = x [num_tokens, k] · w [n, k]^T, w in Q8_0 blocks, k a multiple of 32. The
// activations are quantized to Q8_0 first (llama.cpp's scheme), so results differ from the fp32
// product by that quantization.
void linear_q8_0(float* out, const float* x, int64_t num_tokens, const void* w, int64_t n, int64_t k);

}  // namespace pagoda::cpu
