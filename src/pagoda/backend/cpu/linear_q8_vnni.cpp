// Q8_0 x Q8_0 dot products with AVX512-VNNI, two tokens a 512-bit register: each weight block (32 int8) is
// broadcast to both halves, and vpdpbusd multiplies it with both tokens' blocks at once. vpdpbusd takes one
// unsigned operand, so the activations are stored plus 128 and each lane starts from -128 x (its 4 weights'
// sum), which leaves exactly the int32 sum of the 4 signed products, as the AVX2 kernel's maddubs/madd gives.
//
// AVX-512 code generation is switched on after the includes, for this file's own functions only (see
// linear_avx512.cpp for why).
#include "pagoda/backend/cpu/linear_q8_vnni.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#if defined(__clang__)  // clang (the fuzz build) has no `#pragma GCC target`: the same attribute, its way
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
// GCC 12's AVX-512 intrinsics start results from a deliberately undefined register, which it then reports.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")
#endif

#include "pagoda/backend/cpu/int8_lanes.h"

namespace pagoda::cpu {
namespace {

constexpr int64_t kBlock = 32;
constexpr int64_t kBlockBytes = 34;  // f16 scale + 32 int8

inline float block_scale(const uint8_t* block) {
  uint16_t d16;
  std::memcpy(&d16, block, 2);
  return _cvtsh_ss(d16);
}

// R weight rows x P token pairs; `pair0` is the first pair's index, `out` points at its first token's row 0.
template <int R, int P>
inline void tile(const uint8_t* const (&w)[R], const Q8TokenPairs& x, int64_t pair0, int64_t nb, float* out,
                 int64_t n) {
  __m512 acc[R][P];
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  const __m512i plus128 = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < nb; ++b) {
    __m512i wv[R], start[R];
    __m512 dw[R];
    for (int r = 0; r < R; ++r) {
      const uint8_t* block = w[r] + b * kBlockBytes;
      dw[r] = _mm512_set1_ps(block_scale(block));
      wv[r] = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2)));
      start[r] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), plus128, wv[r]));
    }
    for (int p = 0; p < P; ++p) {
      const int64_t at = (pair0 + p) * nb + b;
      const __m512i xv = _mm512_loadu_si512(x.values + at * 64);
      const __m512 xs = _mm512_loadu_ps(x.scales + at * 16);
      for (int r = 0; r < R; ++r) {
        const __m512 sums = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start[r], xv, wv[r]));
        acc[r][p] = _mm512_fmadd_ps(sums, _mm512_mul_ps(dw[r], xs), acc[r][p]);
      }
    }
  }
  for (int p = 0; p < P; ++p) {
    const int64_t t0 = 2 * (pair0 + p);
    for (int r = 0; r < R; ++r) {
      out[(t0 - 2 * pair0) * n + r] = hsum8(_mm512_castps512_ps256(acc[r][p]));
      if (t0 + 1 < x.num_tokens)
        out[(t0 + 1 - 2 * pair0) * n + r] =
            hsum8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r][p]), 1)));
    }
  }
}

constexpr int kTilePairs = 3;  // 4 rows x 3 pairs: 12 accumulators + 12 per-row registers of 32

template <int R>
void rows_times_pairs(const uint8_t* const (&w)[R], const Q8TokenPairs& x, int64_t pair_begin, int64_t pair_end,
                      int64_t nb, float* out, int64_t n) {
  int64_t p = pair_begin;
  for (; p + kTilePairs <= pair_end; p += kTilePairs) tile<R, kTilePairs>(w, x, p, nb, out + 2 * p * n, n);
  switch (pair_end - p) {
    case 2: return tile<R, 2>(w, x, p, nb, out + 2 * p * n, n);
    case 1: return tile<R, 1>(w, x, p, nb, out + 2 * p * n, n);
    default: return;
  }
}

// One token (decode): two rows a register, row a's block in the low half and row a + 1's in the high half,
// against the token's block broadcast to both; 2 x R2 rows at once. Each lane sums the same four products in
// the same order as tile()'s low half, so the results are tile()'s bit for bit, with half the vpdpbusd,
// conversions and FMAs (tile() pairs the lone token with an empty one). `w` points at row r0.
template <int R2>
inline void one_token_tile(const uint8_t* w, int64_t row_bytes, const Q8TokenPairs& x, int64_t nb, float* out) {
  __m512 acc[R2];
  for (int j = 0; j < R2; ++j) acc[j] = _mm512_setzero_ps();
  const __m512i plus128 = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < nb; ++b) {
    const __m512i xv = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.values + b * 64)));
    const __m512 xs = _mm512_broadcast_f32x8(_mm256_loadu_ps(x.scales + b * 16));
    for (int j = 0; j < R2; ++j) {
      const uint8_t* a = w + (2 * j) * row_bytes + b * kBlockBytes;
      const uint8_t* c = a + row_bytes;
      const __m512i wv = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 2))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 2)), 1);
      const __m512 dw = _mm512_insertf32x8(_mm512_set1_ps(block_scale(a)), _mm256_set1_ps(block_scale(c)), 1);
      const __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), plus128, wv));
      const __m512 sums = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start, xv, wv));
      acc[j] = _mm512_fmadd_ps(sums, _mm512_mul_ps(dw, xs), acc[j]);
    }
  }
  for (int j = 0; j < R2; ++j) {
    out[2 * j] = hsum8(_mm512_castps512_ps256(acc[j]));
    out[2 * j + 1] = hsum8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[j]), 1)));
  }
}

}  // namespace

void q8_rows_times_pairs_vnni(const uint8_t* w, int64_t row_bytes, int64_t r0, int64_t count, const Q8TokenPairs& x,
                              int64_t pair_begin, int64_t pair_end, int64_t k, float* out, int64_t n) {
  const int64_t nb = k / kBlock;
  int64_t r = r0;
  if (x.num_tokens == 1 && pair_begin == 0 && pair_end == 1) {  // one token: rows two a register
    for (; r + 4 <= r0 + count; r += 4) one_token_tile<2>(w + r * row_bytes, row_bytes, x, nb, out + r);
    for (; r + 2 <= r0 + count; r += 2) one_token_tile<1>(w + r * row_bytes, row_bytes, x, nb, out + r);
  }
  for (; r + 4 <= r0 + count; r += 4) {
    const uint8_t* const rows[4] = {w + r * row_bytes, w + (r + 1) * row_bytes, w + (r + 2) * row_bytes,
                                    w + (r + 3) * row_bytes};
    rows_times_pairs<4>(rows, x, pair_begin, pair_end, nb, out + r, n);
  }
  for (; r < r0 + count; ++r) {
    const uint8_t* const rows[1] = {w + r * row_bytes};
    rows_times_pairs<1>(rows, x, pair_begin, pair_end, nb, out + r, n);
  }
}

}  // namespace pagoda::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
