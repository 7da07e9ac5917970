// CPU matrix products for Q8_0 weights in integer arithmetic, as llama.cpp does: each activation row is
// quantized to Q8_0 blocks (32 values, one scale), and each block pair is multiplied as int8 x int8 into
// int32 before one fp32 scale. Every (row, token) dot product is computed the same way whatever the
// number of tokens, so results do not depend on the batch. With AVX512-VNNI the block products run two
// tokens a register (linear_q8_vnni.cpp), bit-identical to the AVX2 kernel here.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "pagoda/backend/cpu/cpu_isa.h"
#include "pagoda/backend/cpu/linear_q8.h"
#include "pagoda/backend/cpu/linear_q8_vnni.h"
#include "pagoda/backend/cpu/simd.h"

namespace pagoda::cpu {
namespace {

constexpr int64_t kBlock = 32;
constexpr int64_t kRowsPerChunk = 16;  // weight rows kept in cache while every token group sweeps them

using QuantizedRows = Q8Blocks;

}  // namespace

void quantize_q8_blocks(const float* x, int64_t num_tokens, int64_t k, Q8Blocks& q, bool with_lane_sums) {
  const int64_t nb = k / kBlock;
  q.scales.resize(static_cast<size_t>(num_tokens * nb));
  q.values.resize(static_cast<size_t>(num_tokens * k));
  q.lane_sums.resize(with_lane_sums ? static_cast<size_t>(num_tokens * nb * 8) : 0);
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t b = 0; b < nb; ++b) {
      const float* src = x + t * k + b * kBlock;
      float amax = 0.0f;
      for (int64_t i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(src[i]));
      const float d = amax / 127.0f;
      const float inv = d != 0.0f ? 1.0f / d : 0.0f;
      q.scales[t * nb + b] = d;
      int8_t* dst = q.values.data() + t * k + b * kBlock;
      for (int64_t i = 0; i < kBlock; ++i) dst[i] = static_cast<int8_t>(std::lrintf(src[i] * inv));
      if (with_lane_sums)
        for (int64_t lane = 0; lane < 8; ++lane)
          q.lane_sums[(t * nb + b) * 8 + lane] = dst[4 * lane] + dst[4 * lane + 1] + dst[4 * lane + 2] + dst[4 * lane + 3];
    }
  }
}

Q8TokenPairs pair_q8_blocks(const Q8Blocks& q, int64_t num_tokens, int64_t k, Q8PairedBlocks& paired) {
  const int64_t nb = k / kBlock, pairs = (num_tokens + 1) / 2;
  const bool with_lane_sums = !q.lane_sums.empty();
  paired.values.resize(static_cast<size_t>(pairs * nb * 64));
  paired.scales.resize(static_cast<size_t>(pairs * nb * 16));
  paired.lane_sums.resize(with_lane_sums ? static_cast<size_t>(pairs * nb * 16) : 0);
  for (int64_t p = 0; p < pairs; ++p) {
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t at = p * nb + b;
      for (int64_t half = 0; half < 2; ++half) {
        const int64_t t = 2 * p + half;
        const bool real = t < num_tokens;
        const int8_t* v = q.values.data() + t * k + b * kBlock;
        for (int64_t i = 0; i < kBlock; ++i)
          paired.values[at * 64 + half * kBlock + i] = static_cast<uint8_t>((real ? v[i] : 0) + 128);
        for (int64_t lane = 0; lane < 8; ++lane) {
          paired.scales[at * 16 + half * 8 + lane] = real ? q.scales[t * nb + b] : 0.0f;
          if (with_lane_sums)
            paired.lane_sums[at * 16 + half * 8 + lane] =
                real ? static_cast<float>(q.lane_sums[(t * nb + b) * 8 + lane]) : 0.0f;
        }
      }
    }
  }
  return Q8TokenPairs{paired.values.data(), paired.scales.data(),
                      with_lane_sums ? paired.lane_sums.data() : nullptr, num_tokens};
}

namespace {

// 32 int8 x 32 int8 -> 8 int32 partial sums, as floats. maddubs needs an unsigned operand: |w| times x
// with w's sign moved onto x (|w| <= 127, so pairs fit in int16).
inline __m256 block_dot(const int8_t* w, const int8_t* x) {
  const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
  const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv));
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

template <int R, int T>
inline void dot_block(const uint8_t* const (&w)[R], const QuantizedRows& q, int64_t t0, int64_t k, float* out,
                      int64_t stride) {
  const int64_t nb = k / kBlock;
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    for (int r = 0; r < R; ++r) {
      const uint8_t* block = w[r] + b * 34;
      uint16_t d16;
      std::memcpy(&d16, block, 2);
      const float dw = _cvtsh_ss(d16);
      for (int t = 0; t < T; ++t) {
        const int64_t tok = t0 + t;
        const __m256 scale = _mm256_set1_ps(dw * q.scales[tok * nb + b]);
        acc[r][t] = _mm256_fmadd_ps(block_dot(reinterpret_cast<const int8_t*>(block + 2),
                                              q.values.data() + tok * k + b * kBlock), scale, acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) out[t * stride + r] = hsum(acc[r][t]);
}

template <int R>
void token_groups(const uint8_t* const (&w)[R], const QuantizedRows& q, int64_t num_tokens, int64_t k, float* out,
                  int64_t n) {
  int64_t t = 0;
  for (; t + 4 <= num_tokens; t += 4) dot_block<R, 4>(w, q, t, k, out + t * n, n);
  switch (num_tokens - t) {
    case 3: dot_block<R, 3>(w, q, t, k, out + t * n, n); break;
    case 2: dot_block<R, 2>(w, q, t, k, out + t * n, n); break;
    case 1: dot_block<R, 1>(w, q, t, k, out + t * n, n); break;
    default: break;
  }
}

// Each thread takes chunks of rows; within a chunk, blocks of token pairs stay in L2 while the chunk's rows
// sweep them.
void linear_q8_0_vnni(float* out, const QuantizedRows& q, int64_t num_tokens, const uint8_t* w, int64_t n, int64_t k) {
  constexpr int64_t kPairsPerBlock = 24;
  thread_local Q8PairedBlocks paired;
  const Q8TokenPairs x = pair_q8_blocks(q, num_tokens, k, paired);
  const int64_t row_bytes = k / kBlock * 34, pairs = (num_tokens + 1) / 2;
  const int64_t num_chunks = (n + kRowsPerChunk - 1) / kRowsPerChunk;
#pragma omp parallel for schedule(static) if (n * k * num_tokens >= (1 << 16))
  for (int64_t c = 0; c < num_chunks; ++c) {
    const int64_t r0 = c * kRowsPerChunk, count = std::min(kRowsPerChunk, n - r0);
    for (int64_t p = 0; p < pairs; p += kPairsPerBlock)
      q8_rows_times_pairs_vnni(w, row_bytes, r0, count, x, p, std::min(pairs, p + kPairsPerBlock), k, out, n);
  }
}

}  // namespace

void linear_q8_0(float* out, const float* x, int64_t num_tokens, const void* w, int64_t n, int64_t k) {
  thread_local QuantizedRows q;  // the calling thread's; read-only inside the parallel region
  quantize_q8_blocks(x, num_tokens, k, q);
  const auto* bytes = static_cast<const uint8_t*>(w);
  if (active_isa() == Isa::kAvx512 && cpu_features().avx512_vnni) return linear_q8_0_vnni(out, q, num_tokens, bytes, n, k);
  const int64_t row_bytes = k / kBlock * 34;
  const int64_t num_chunks = (n + kRowsPerChunk - 1) / kRowsPerChunk;
  const QuantizedRows& qx = q;
#pragma omp parallel for schedule(static) if (n * k * num_tokens >= (1 << 16))
  for (int64_t c = 0; c < num_chunks; ++c) {
    const int64_t r_end = std::min(n, (c + 1) * kRowsPerChunk);
    int64_t r = c * kRowsPerChunk;
    for (; r + 4 <= r_end; r += 4) {
      const uint8_t* const rows[4] = {bytes + r * row_bytes, bytes + (r + 1) * row_bytes, bytes + (r + 2) * row_bytes,
                                      bytes + (r + 3) * row_bytes};
      token_groups<4>(rows, qx, num_tokens, k, out + r, n);
    }
    for (; r < r_end; ++r) {
      const uint8_t* const rows[1] = {bytes + r * row_bytes};
      token_groups<1>(rows, qx, num_tokens, k, out + r, n);
    }
  }
}

}  // namespace pagoda::cpu
