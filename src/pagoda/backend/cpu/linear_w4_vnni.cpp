// 4-bit x int8-block dot products with AVX512-VNNI, two tokens a 512-bit register (as linear_q8_vnni.cpp):
// each block's 32 codes are unpacked once per chunk of rows (w4_prepare_rows_vnni), broadcast to both halves,
// and vpdpbusd multiplies them with both tokens' activations (stored plus 128, unsigned). With zero points the codes are made signed
// (q - z) first; each lane starts from -128 x (its 4 codes' sum), which leaves exactly the int32
// sum((q - z) * xq), or sum(q * xq) with offsets: the AVX2 kernel's integers, scaled and summed in its order.
//
// AVX-512 code generation is switched on after the includes, for this file's own functions only (see
// linear_avx512.cpp for why).
#include "pagoda/backend/cpu/linear_w4_vnni.h"

#include <immintrin.h>

#include <cstdint>

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
constexpr int64_t kPrefetchBytes = 512;  // ahead in each row's codes

// The prepared rows (w4_prepare_rows_vnni): per row and block, the 32 codes as vpdpbusd's signed operand
// ((q - z) with zero points, q with offsets) and the 8 lanes' starting values, -128 x (the lane's codes' sum).
constexpr int64_t kPreparedBlockBytes = 64;

// A block's signed operand: the 32 codes, less the zero point of its group g when there is one.
inline __m256i block_operand(const W4Rows& w, int64_t row, int64_t b, int64_t g) {
  const uint8_t* codes = w.codes + row * (w.k / 2) + b * (kBlock / 2);
  _mm_prefetch(reinterpret_cast<const char*>(codes) + kPrefetchBytes, _MM_HINT_T0);  // decode streams the codes
  const __m256i q = int4_codes32(codes);
  if (w.offsets != nullptr) return q;
  return _mm256_sub_epi8(q, _mm256_set1_epi8(static_cast<char>(w.zeros[row * w.groups + g])));
}

// A block's signed operand and starting sums (as w4_prepare_rows_vnni stores them).
inline void unpack_block(const W4Rows& w, int64_t row, int64_t b, int64_t g, __m256i& q, __m256i& start) {
  q = block_operand(w, row, b, g);
  start = _mm256_sub_epi32(_mm256_setzero_si256(),
                           _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(static_cast<char>(0x80)), q));
}

// R rows x P pairs; the rows' blocks unpacked here (kPrepared false: a few tokens, the codes streamed from
// memory by four rows at once) or read from `prepared` (many tokens: unpacked once per chunk of rows).
template <int R, int P, bool kOffsets, bool kPrepared>
inline void tile(const W4Rows& w, const uint8_t* prepared, int64_t r0, int64_t prep_r0, const Q8TokenPairs& x,
                 int64_t pair0, float* out, int64_t n) {
  const int64_t nb = w.k / kBlock;
  __m512 acc[R][P];
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t g = b * kBlock / w.group_size;
    __m512i wv[R], start[R];
    __m512 s[R], m[R];
    for (int r = 0; r < R; ++r) {
      const int64_t row = r0 + r;
      if constexpr (kPrepared) {
        const uint8_t* block = prepared + ((r0 - prep_r0 + r) * nb + b) * kPreparedBlockBytes;
        wv[r] = _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(block)));
        start[r] = _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(block + 32)));
      } else {
        __m256i q, first;
        unpack_block(w, row, b, g, q, first);
        wv[r] = _mm512_broadcast_i64x4(q);
        start[r] = _mm512_broadcast_i64x4(first);
      }
      s[r] = _mm512_set1_ps(w.scales[row * w.groups + g]);
      if constexpr (kOffsets) m[r] = _mm512_set1_ps(w.offsets[row * w.groups + g]);
    }
    for (int p = 0; p < P; ++p) {
      const int64_t at = (pair0 + p) * nb + b;
      const __m512i xv = _mm512_loadu_si512(x.values + at * 64);
      const __m512 dx = _mm512_loadu_ps(x.scales + at * 16);
      for (int r = 0; r < R; ++r) {
        const __m512 sums = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start[r], xv, wv[r]));
        acc[r][p] = _mm512_fmadd_ps(sums, _mm512_mul_ps(s[r], dx), acc[r][p]);
        if constexpr (kOffsets)
          acc[r][p] = _mm512_fnmadd_ps(_mm512_loadu_ps(x.lane_sums + at * 16), _mm512_mul_ps(m[r], dx), acc[r][p]);
      }
    }
  }
  for (int p = 0; p < P; ++p) {
    const int64_t t0 = 2 * (pair0 + p);
    for (int r = 0; r < R; ++r) {
      out[t0 * n + r0 + r] = hsum8(_mm512_castps512_ps256(acc[r][p]));
      if (t0 + 1 < x.num_tokens)
        out[(t0 + 1) * n + r0 + r] = hsum8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r][p]), 1)));
    }
  }
}

// One token (decode): two rows a register, row a's block in the low half and row a + 1's in the high half,
// against the token's block broadcast to both; 2 x R2 rows at once. Each lane sums the same four products in
// the same order as tile()'s low half, so the results are tile()'s bit for bit, with half the vpdpbusd,
// conversions and FMAs (tile() pairs the lone token with an empty one).
template <int R2, bool kOffsets>
inline void one_token_tile(const W4Rows& w, int64_t r0, const Q8TokenPairs& x, float* out) {
  const int64_t nb = w.k / kBlock;
  const int64_t blocks_per_group = w.group_size / kBlock;
  __m512 acc[R2];
  for (int j = 0; j < R2; ++j) acc[j] = _mm512_setzero_ps();
  int64_t g = 0, in_group = 0;  // the block's group, counted rather than divided
  for (int64_t b = 0; b < nb; ++b) {
    const __m512i xv = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.values + b * 64)));
    const __m512 dx = _mm512_broadcast_f32x8(_mm256_loadu_ps(x.scales + b * 16));
    for (int j = 0; j < R2; ++j) {
      const int64_t a = r0 + 2 * j;
      const __m512i wv =
          _mm512_inserti64x4(_mm512_castsi256_si512(block_operand(w, a, b, g)), block_operand(w, a + 1, b, g), 1);
      const __m512i start = _mm512_sub_epi32(
          _mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(static_cast<char>(0x80)), wv));
      const __m512 s = _mm512_insertf32x8(_mm512_set1_ps(w.scales[a * w.groups + g]),
                                          _mm256_set1_ps(w.scales[(a + 1) * w.groups + g]), 1);
      const __m512 sums = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start, xv, wv));
      acc[j] = _mm512_fmadd_ps(sums, _mm512_mul_ps(s, dx), acc[j]);
      if constexpr (kOffsets) {
        const __m512 m = _mm512_insertf32x8(_mm512_set1_ps(w.offsets[a * w.groups + g]),
                                            _mm256_set1_ps(w.offsets[(a + 1) * w.groups + g]), 1);
        acc[j] = _mm512_fnmadd_ps(_mm512_broadcast_f32x8(_mm256_loadu_ps(x.lane_sums + b * 16)), _mm512_mul_ps(m, dx),
                                  acc[j]);
      }
    }
    if (++in_group == blocks_per_group) {
      ++g;
      in_group = 0;
    }
  }
  for (int j = 0; j < R2; ++j) {
    out[r0 + 2 * j] = hsum8(_mm512_castps512_ps256(acc[j]));
    out[r0 + 2 * j + 1] = hsum8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[j]), 1)));
  }
}

template <bool kOffsets>
void rows_one_token(const W4Rows& w, int64_t r0, int64_t count, const Q8TokenPairs& x, float* out) {
  int64_t r = r0;
  for (; r + 4 <= r0 + count; r += 4) one_token_tile<2, kOffsets>(w, r, x, out);
  for (; r + 2 <= r0 + count; r += 2) one_token_tile<1, kOffsets>(w, r, x, out);
  for (; r < r0 + count; ++r) tile<1, 1, kOffsets, false>(w, nullptr, r, r0, x, 0, out, 0);
}

template <int R, bool kOffsets, bool kPrepared>
void rows_times_pairs(const W4Rows& w, const uint8_t* prepared, int64_t r0, int64_t prep_r0, const Q8TokenPairs& x,
                      int64_t pair_begin, int64_t pair_end, float* out, int64_t n) {
  int64_t p = pair_begin;
  for (; p + 2 <= pair_end; p += 2) tile<R, 2, kOffsets, kPrepared>(w, prepared, r0, prep_r0, x, p, out, n);
  if (p < pair_end) tile<R, 1, kOffsets, kPrepared>(w, prepared, r0, prep_r0, x, p, out, n);
}

template <bool kOffsets, bool kPrepared>
void rows(const W4Rows& w, const uint8_t* prepared, int64_t r0, int64_t count, const Q8TokenPairs& x,
          int64_t pair_begin, int64_t pair_end, float* out, int64_t n) {
  int64_t r = r0;
  for (; r + 4 <= r0 + count; r += 4)
    rows_times_pairs<4, kOffsets, kPrepared>(w, prepared, r, r0, x, pair_begin, pair_end, out, n);
  for (; r < r0 + count; ++r)
    rows_times_pairs<1, kOffsets, kPrepared>(w, prepared, r, r0, x, pair_begin, pair_end, out, n);
}

}  // namespace

int64_t w4_prepared_bytes(int64_t count, int64_t k) { return count * (k / kBlock) * kPreparedBlockBytes; }

void w4_prepare_rows_vnni(const W4Rows& w, int64_t r0, int64_t count, uint8_t* prepared) {
  const int64_t nb = w.k / kBlock;
  for (int64_t r = 0; r < count; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      __m256i q, start;
      unpack_block(w, r0 + r, b, b * kBlock / w.group_size, q, start);
      uint8_t* dst = prepared + (r * nb + b) * kPreparedBlockBytes;
      _mm256_store_si256(reinterpret_cast<__m256i*>(dst), q);
      _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 32), start);
    }
  }
}

void w4_rows_times_pairs_vnni(const W4Rows& w, const uint8_t* prepared, int64_t r0, int64_t count,
                              const Q8TokenPairs& x, int64_t pair_begin, int64_t pair_end, float* out, int64_t n) {
  const bool offsets = w.offsets != nullptr;
  // One token: out is that token's row of n outputs (n unused by one_token_tile's indexing).
  if (x.num_tokens == 1 && prepared == nullptr && pair_begin == 0 && pair_end == 1 && w.group_size % kBlock == 0) {
    return offsets ? rows_one_token<true>(w, r0, count, x, out) : rows_one_token<false>(w, r0, count, x, out);
  }
  if (prepared != nullptr) {
    return offsets ? rows<true, true>(w, prepared, r0, count, x, pair_begin, pair_end, out, n)
                   : rows<false, true>(w, prepared, r0, count, x, pair_begin, pair_end, out, n);
  }
  return offsets ? rows<true, false>(w, prepared, r0, count, x, pair_begin, pair_end, out, n)
                 : rows<false, false>(w, prepared, r0, count, x, pair_begin, pair_end, out, n);
}

}  // namespace pagoda::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
