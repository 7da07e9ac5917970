// Small AVX2 building blocks shared by the CPU kernels, and the one dot-product micro-kernel every
// fp32-accumulating matrix product uses: whichever path a product takes (decode or prefill), each
// (row, token) dot product is the same sequence of operations, so results do not depend on the batch.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "pagoda/backend/cpu/register_pin.h"
#include "pagoda/core/dtype.h"

namespace pagoda::cpu {

inline float hsum(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// Weight rows as seen by the micro-kernel: 8 consecutive weights at a time, converted in registers.
struct F32Row {
  const float* p;
  __m256 load8(int64_t i) const { return _mm256_loadu_ps(p + i); }
  float at(int64_t i) const { return p[i]; }
};

struct F16Row {
  const uint16_t* p;
  __m256 load8(int64_t i) const { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i))); }
  float at(int64_t i) const { return _cvtsh_ss(p[i]); }
};

struct BF16Row {
  const uint16_t* p;
  __m256 load8(int64_t i) const {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  float at(int64_t i) const { return bf16_to_f32(p[i]); }
};

// out[t * out_stride + r] = dot(w[r], x[t]) for R weight rows and T tokens; token t's activations start
// at x + t * k. 8-wide FMA accumulation, then a horizontal sum, then the scalar tail.
// kPrefetch (decode, the rows streaming from memory): each row's bytes fetched kStreamedRowPrefetchBytes ahead,
// once a 64-byte line (the same sums). The integer kernels' distances are in int8_lanes.h.
inline constexpr int64_t kStreamedRowPrefetchBytes = 1024;
template <class Row, int R, int T, bool kPrefetch = false>
inline void dot_block(const Row (&w)[R], const float* x, int64_t k, float* out, int64_t out_stride) {
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  const int64_t k8 = k / 8 * 8;
  for (int64_t i = 0; i < k8; i += 8) {
    if constexpr (kPrefetch) {
      constexpr int64_t per_line = 64 / sizeof(*w[0].p);  // elements a line holds: 32 (16-bit), 16 (fp32)
      if (i % per_line == 0)
        for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(w[r].p + i) + kStreamedRowPrefetchBytes, _MM_HINT_T0);
    }
    __m256 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = w[r].load8(i);
    for (int t = 0; t < T; ++t) {
      __m256 xv = _mm256_loadu_ps(x + t * k + i);
      // One load for the R rows of 16-bit weights. fp32 rows keep the loads folded into their FMAs: pinned there,
      // the activations made three of TinyLlama's four shapes 0.87-0.90x (16 registers for 12 sums, 3 rows and the
      // activations; docs/PERFORMANCE.md).
      if constexpr (R > 1 && sizeof(*w[0].p) == 2) keep_in_registers(xv);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      float s = hsum(acc[r][t]);
      for (int64_t i = k8; i < k; ++i) s += w[r].at(i) * x[t * k + i];
      out[t * out_stride + r] = s;
    }
  }
}

}  // namespace pagoda::cpu
