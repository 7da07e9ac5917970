// 4-bit x int8-block dot products with AVX512-VNNI, one 128-column chunk a 512-bit register (the lanes of
// linear_w4_int8.h): a load, a mask and a shift unpack a row's chunk into its even and odd columns. Prompts
// (prepared rows): the zero point is subtracted bytewise, and two vpdpbusd against the token's values + 128,
// started from -128 x (the lane's codes added), leave each lane's exact int32 sum. Decode (streamed rows): two
// vpdpbusd of the unsigned codes against the signed values, less z x (the lane's values added) by vpdpwssd: the
// same int32. Then the lane's scales in fp32, as the AVX2 loops do.
//
// AVX-512 code generation is switched on after the includes, for this file's own functions only (see
// linear_avx512.cpp for why).
#include "pagoda/backend/cpu/linear_w4_vnni.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "pagoda/backend/cpu/register_pin.h"
#include "pagoda/core/check.h"

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


// Where a chunk's codes and groups are: its valid code bytes and groups as load masks, and its first group.
struct Chunk {
  __mmask64 code_bytes;
  __mmask8 groups;  // the chunk's groups (1 to 4) as a load mask
  int64_t group0;   // its first group
};

// No division for whole chunks of the common group sizes (a divide per chunk cost as much as the chunk's
// vector work).
inline Chunk chunk_at(const W4Rows& w, int64_t c) {
  const int64_t gs = w.group_size;
  if (4 * c + 4 <= w.k / 32) {
    if (gs == 32) return Chunk{~__mmask64{0}, 0xf, 4 * c};
    if (gs == 64) return Chunk{~__mmask64{0}, 0x3, 2 * c};
    return Chunk{~__mmask64{0}, 0x1, gs == kW4Chunk ? c : c * kW4Chunk / gs};
  }
  const int64_t blocks = w.k / 32 - 4 * c;
  const int64_t blocks_per_group = gs / 32;
  const int64_t groups = (blocks + blocks_per_group - 1) / blocks_per_group;  // 1 when a chunk is in one group
  return Chunk{(__mmask64{1} << (16 * blocks)) - 1, static_cast<__mmask8>((1u << groups) - 1), c * kW4Chunk / gs};
}

// Per lane, its group's index within the chunk (lane_group) and, as pshufb controls for the zero points'
// bytes, the same index in every byte of the lane (lane_group_bytes) or in its low byte with zeros above
// (lane_group_word: the zero point as the lane's int32).
struct LaneGroups {
  __m512i lane_group, lane_group_bytes, lane_group_word;
};

inline LaneGroups make_lane_groups(int64_t group_size) {
  alignas(64) int32_t idx[16], bytes[16], word[16];
  for (int l = 0; l < 16; ++l) {
    idx[l] = group_size == 32 ? l / 4 : group_size == 64 ? l / 8 : 0;
    bytes[l] = idx[l] * 0x01010101;
    word[l] = static_cast<int32_t>(0x80808000u | static_cast<uint32_t>(idx[l]));
  }
  return LaneGroups{_mm512_load_si512(idx), _mm512_load_si512(bytes), _mm512_load_si512(word)};
}

// Built once per group-size class (32, 64, a multiple of 128): the per-chunk-of-rows calls only pick one.
inline const LaneGroups& lane_groups(int64_t group_size) {
  static const LaneGroups by_class[3] = {make_lane_groups(32), make_lane_groups(64), make_lane_groups(128)};
  return by_class[group_size == 32 ? 0 : group_size == 64 ? 1 : 2];
}

// A row's chunk, unpacked (the prepared layout of linear_w4_int8.h, in registers).
struct Unpacked {
  __m512i even, odd, start;
  __m512 s, m;
};

// A row's chunk of codes as its lanes' even and odd columns (0..15 each), and the lanes' scales and offsets.
inline void load_codes(const W4Rows& w, int64_t row, int64_t c, const Chunk& ch, __m512i& even, __m512i& odd) {
  const uint8_t* codes = w.codes + row * (w.k / 2) + c * (kW4Chunk / 2);
  _mm_prefetch(reinterpret_cast<const char*>(codes) + kW4CodesPrefetchBytes, _MM_HINT_T0);
  const __m512i bytes = ch.code_bytes == ~__mmask64{0} ? _mm512_loadu_si512(codes) : _mm512_maskz_loadu_epi8(ch.code_bytes, codes);
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  even = _mm512_and_si512(bytes, nibble);
  odd = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), nibble);
}

template <GroupValues::Form F>
inline __m512 lane_params(const GroupValues& v, const LaneGroups& lg, int64_t row, int64_t at, const Chunk& ch) {
  return _mm512_permutexvar_ps(lg.lane_group, _mm512_zextps128_ps512(load_group_values_avx512<F>(v, row, at, ch.group0, ch.groups)));
}

// The zero points of the chunk's groups, in the low bytes of a 128-bit register (the symmetric form: 8 in each).
template <class P>
inline __m128i chunk_zeros(const W4Rows& w, int64_t at, const Chunk& ch) {
  if constexpr (P::zeros == W4Zeros::kSymmetric) return _mm_set1_epi8(kW4SymmetricZero);
  else return _mm_maskz_loadu_epi8(ch.groups, w.zeros + at);
}

template <class P>  // a W4Form
inline Unpacked unpack(const W4Rows& w, const LaneGroups& lg, int64_t row, int64_t c, const Chunk& ch) {
  Unpacked u;
  load_codes(w, row, c, ch, u.even, u.odd);
  const int64_t at = row * w.groups + ch.group0;
  if constexpr (!P::offsets) {
    const __m512i zb = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(chunk_zeros<P>(w, at, ch)), lg.lane_group_bytes);
    u.even = _mm512_sub_epi8(u.even, zb);
    u.odd = _mm512_sub_epi8(u.odd, zb);
  }
  const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
  u.start = _mm512_sub_epi32(_mm512_setzero_si512(),
                             _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), k128, u.even), k128, u.odd));
  u.s = lane_params<P::values>(w.scales, lg, row, at, ch);
  if constexpr (P::offsets) u.m = lane_params<P::values>(w.offsets, lg, row, at, ch);
  return u;
}

inline Unpacked load_prepared(const uint8_t* p, bool offsets) {
  Unpacked u;
  u.even = _mm512_load_si512(p);
  u.odd = _mm512_load_si512(p + 64);
  u.start = _mm512_load_si512(p + 128);
  u.s = _mm512_load_ps(reinterpret_cast<const float*>(p + 192));
  if (offsets) u.m = _mm512_load_ps(reinterpret_cast<const float*>(p + 256));
  return u;
}

// A few tokens (decode): a row's chunk as it streams in, as unsigned codes against the signed values; the zero
// point comes off through the values' lane sums, sum((q - z) x) = sum(q x) - z sum(x), so there are no
// starting sums to compute per chunk. The same int32 as the prepared form's.
struct Streamed {
  __m512i even, odd, zero;  // codes 0..15; the zero point as each lane's int32 (zeros form)
  __m512 s, m;
};

template <class P>
inline Streamed stream(const W4Rows& w, const LaneGroups& lg, int64_t row, int64_t c, const Chunk& ch) {
  Streamed u;
  load_codes(w, row, c, ch, u.even, u.odd);
  const int64_t at = row * w.groups + ch.group0;
  if constexpr (!P::offsets)
    u.zero = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(chunk_zeros<P>(w, at, ch)), lg.lane_group_word);
  u.s = lane_params<P::values>(w.scales, lg, row, at, ch);
  if constexpr (P::offsets) u.m = lane_params<P::values>(w.offsets, lg, row, at, ch);
  return u;
}

struct Token {
  __m512i even, odd;
  __m512 dx, sdx;
};

struct SignedToken {  // a token's chunk with its values signed (W4Activations::signed_values)
  __m512i even, odd, neg_sums;
  __m512 dx, sdx;
};

template <bool kOffsets>
inline SignedToken signed_token_chunk(const W4Activations& x, int64_t t, int64_t c) {
  const int64_t at = t * x.chunks + c;
  SignedToken v;
  v.even = _mm512_loadu_si512(x.bytes + at * 128);
  v.odd = _mm512_loadu_si512(x.bytes + at * 128 + 64);
  v.dx = _mm512_loadu_ps(x.dx + at * 16);
  if constexpr (kOffsets) v.sdx = _mm512_loadu_ps(x.sdx + at * 16);
  if constexpr (!kOffsets) v.neg_sums = _mm512_loadu_si512(x.neg_sums + at * 16);
  return v;
}

// One chunk of a streamed row against T tokens from t0, added to each token's lanes.
template <int T, class P>
inline void add_streamed_chunk(const Streamed& u, const W4Activations& x, int64_t t0, int64_t c, __m512 (&acc)[T]) {
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const SignedToken v = signed_token_chunk<P::offsets>(x, t0 + t, c);
    __m512i ints = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u.even, v.even), u.odd, v.odd);
    if constexpr (!P::offsets) ints = _mm512_dpwssd_epi32(ints, u.zero, v.neg_sums);
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ints), _mm512_mul_ps(u.s, v.dx), acc[t]);
    if constexpr (P::offsets) acc[t] = _mm512_fnmadd_ps(u.m, v.sdx, acc[t]);
  }
}

// One row x T tokens from t0, the row's chunks streamed from memory (a few tokens). Whole chunks of groups of
// 32, 64 or 128 (all of a GGUF file's, most checkpoints') step their addresses instead of working them out per
// chunk: chunk_at's branches, the row's offsets and the zero points' shuffle came to about 50 instructions a
// chunk where the arithmetic is 15 (`perf annotate`, Q4_0 decode). The rest (a last partial chunk, larger
// groups) goes through chunk_at. Both add the same values in the same order.
template <int T, class P>
inline void streamed_row(const W4Rows& w, const LaneGroups& lg, int64_t row, const W4Activations& x, int64_t t0,
                         float* out, int64_t n) {
  __m512 acc[T];
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  int64_t c = 0;
  if (w.group_size <= kW4Chunk) {
    const int64_t whole = w.k / kW4Chunk;
    const int64_t groups_per_chunk = kW4Chunk / w.group_size;  // 4, 2 or 1
    const auto groups = static_cast<__mmask8>((1u << groups_per_chunk) - 1);
    const uint8_t* codes = w.codes + row * (w.k / 2);
    const int64_t row_groups = row * w.groups;  // the row's first group
    const __m512i nibble = _mm512_set1_epi8(0x0f);
    Streamed u;
    if constexpr (P::zeros == W4Zeros::kSymmetric) u.zero = _mm512_set1_epi32(kW4SymmetricZero);
    for (int64_t g0 = 0; c < whole; ++c, codes += kW4Chunk / 2, g0 += groups_per_chunk) {
      _mm_prefetch(reinterpret_cast<const char*>(codes) + kW4CodesPrefetchBytes, _MM_HINT_T0);
      const __m512i bytes = _mm512_loadu_si512(codes);
      u.even = _mm512_and_si512(bytes, nibble);
      u.odd = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), nibble);
      const int64_t at = row_groups + g0;
      const Chunk here{~__mmask64{0}, groups, g0};
      if constexpr (P::zeros == W4Zeros::kPerGroup) {
        _mm_prefetch(reinterpret_cast<const char*>(w.zeros + at + kGroupValuesPrefetchGroups), _MM_HINT_T0);
        u.zero = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(chunk_zeros<P>(w, at, here)), lg.lane_group_word);
      }
      prefetch_group_values<P::values>(w.scales, row, at, g0);
      u.s = lane_params<P::values>(w.scales, lg, row, at, here);
      if constexpr (P::offsets) {
        prefetch_group_values<P::values>(w.offsets, row, at, g0);
        u.m = lane_params<P::values>(w.offsets, lg, row, at, here);
      }
      add_streamed_chunk<T, P>(u, x, t0, c, acc);
    }
  }
  for (; c < x.chunks; ++c) add_streamed_chunk<T, P>(stream<P>(w, lg, row, c, chunk_at(w, c)), x, t0, c, acc);
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const __m256 lo = _mm512_castps512_ps256(acc[t]);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[t]), 1));
    out[(t0 + t) * n + row] = hsum8(_mm256_add_ps(lo, hi));
  }
}

template <bool kOffsets>
inline Token token_chunk(const W4Activations& x, int64_t t, int64_t c) {
  const int64_t at = t * x.chunks + c;
  Token v;
  v.even = _mm512_loadu_si512(x.bytes + at * 128);
  v.odd = _mm512_loadu_si512(x.bytes + at * 128 + 64);
  v.dx = _mm512_loadu_ps(x.dx + at * 16);
  if constexpr (kOffsets) v.sdx = _mm512_loadu_ps(x.sdx + at * 16);
  return v;
}

// R rows from r0 x T tokens from t0, the rows' chunks read from `prepared` (rows from prep_r0): many tokens.
template <int R, int T, bool kOffsets>
inline void prepared_tile(const uint8_t* prepared, int64_t r0, int64_t prep_r0, const W4Activations& x, int64_t t0,
                          float* out, int64_t n) {
  __m512 acc[R][T];
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t c = 0; c < x.chunks; ++c) {
    Token v[T];
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) v[t] = token_chunk<kOffsets>(x, t0 + t, c);
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      Unpacked u = load_prepared(prepared + ((r0 - prep_r0 + r) * x.chunks + c) * kW4PreparedBytes, kOffsets);
      if constexpr (T > 1) {  // one load of each for the T tokens
        keep_in_registers(u.even, u.odd, u.start, u.s);
        if constexpr (kOffsets) keep_in_registers(u.m);
      }
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m512i ints = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(u.start, v[t].even, u.even), v[t].odd, u.odd);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ints), _mm512_mul_ps(u.s, v[t].dx), acc[r][t]);
        if constexpr (kOffsets) acc[r][t] = _mm512_fnmadd_ps(u.m, v[t].sdx, acc[r][t]);
      }
    }
  }
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m256 lo = _mm512_castps512_ps256(acc[r][t]);
      const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r][t]), 1));
      out[(t0 + t) * n + r0 + r] = hsum8(_mm256_add_ps(lo, hi));
    }
}

template <int R, class P, bool kPrepared>
void rows_times_tokens(const W4Rows& w, const LaneGroups& lg, const uint8_t* prepared, int64_t r0, int64_t prep_r0,
                       const W4Activations& x, int64_t t0, int64_t t1, float* out, int64_t n) {
  int64_t t = t0;
  if constexpr (kPrepared) {
    for (; t + 3 <= t1; t += 3) prepared_tile<R, 3, P::offsets>(prepared, r0, prep_r0, x, t, out, n);
    for (; t + 2 <= t1; t += 2) prepared_tile<R, 2, P::offsets>(prepared, r0, prep_r0, x, t, out, n);
    if (t < t1) prepared_tile<R, 1, P::offsets>(prepared, r0, prep_r0, x, t, out, n);
  } else {
    static_assert(R == 1, "streamed rows go one at a time");
    for (; t + 4 <= t1; t += 4) streamed_row<4, P>(w, lg, r0, x, t, out, n);
    for (; t + 2 <= t1; t += 2) streamed_row<2, P>(w, lg, r0, x, t, out, n);
    if (t < t1) streamed_row<1, P>(w, lg, r0, x, t, out, n);
  }
}

// P: the weight's W4Form (the prepared rows hold the unpacked codes and fp32 scales whatever it was).
template <class P, bool kPrepared>
void rows(const W4Rows& w, const uint8_t* prepared, int64_t r0, int64_t count, const W4Activations& x, int64_t t0,
          int64_t t1, float* out, int64_t n) {
  const LaneGroups& lg = lane_groups(w.group_size);
  int64_t r = r0;
  // Streamed rows go one at a time, each thread reading its rows' codes in address order: a tile of 4 rows read
  // 4 places a row apart (the same 4 KB page for 1 KB rows) and streamed from memory at 13-17 GB/s where one row
  // at a time reaches 21-25 (2 threads, DRAM-bound shapes, AMD EPYC Zen 5; at 4 tokens 8.5 against 22:
  // docs/PERFORMANCE.md). Prepared rows (many tokens) are read from the thread's own buffer: tiles of 4.
  if constexpr (kPrepared)
    for (; r + 4 <= r0 + count; r += 4) rows_times_tokens<4, P, kPrepared>(w, lg, prepared, r, r0, x, t0, t1, out, n);
  for (; r < r0 + count; ++r) rows_times_tokens<1, P, kPrepared>(w, lg, prepared, r, r0, x, t0, t1, out, n);
}

}  // namespace

void w4_prepare_rows_vnni(const W4Rows& w, int64_t r0, int64_t count, uint8_t* prepared) {
  const LaneGroups& lg = lane_groups(w.group_size);
  const int64_t chunks = w4_chunks(w.k);
  with_w4_form(w, [&](auto form) {
    using P = decltype(form);
    for (int64_t r = 0; r < count; ++r) {
      for (int64_t c = 0; c < chunks; ++c) {
        const Unpacked u = unpack<P>(w, lg, r0 + r, c, chunk_at(w, c));
        uint8_t* dst = prepared + (r * chunks + c) * kW4PreparedBytes;
        _mm512_store_si512(dst, u.even);
        _mm512_store_si512(dst + 64, u.odd);
        _mm512_store_si512(dst + 128, u.start);
        _mm512_store_ps(reinterpret_cast<float*>(dst + 192), u.s);
        if constexpr (P::offsets) _mm512_store_ps(reinterpret_cast<float*>(dst + 256), u.m);
      }
    }
  });
}

void w4_rows_times_tokens_vnni(const W4Rows& w, const uint8_t* prepared, int64_t r0, int64_t count,
                               const W4Activations& x, int64_t t0, int64_t t1, float* out, int64_t n) {
  using F = GroupValues::Form;
  if (prepared != nullptr) {  // the prepared rows' form is fp32 whatever the weight's
    PAGODA_CHECK(!x.signed_values, "w4_rows_times_tokens_vnni: prepared rows take the values + 128");
    return w.offsets ? rows<W4Form<W4Zeros::kOffsets, F::kF32>, true>(w, prepared, r0, count, x, t0, t1, out, n)
                     : rows<W4Form<W4Zeros::kPerGroup, F::kF32>, true>(w, prepared, r0, count, x, t0, t1, out, n);
  }
  PAGODA_CHECK(x.signed_values, "w4_rows_times_tokens_vnni: streamed rows take the values signed");
  with_w4_form(w, [&](auto form) { rows<decltype(form), false>(w, prepared, r0, count, x, t0, t1, out, n); });
}

}  // namespace pagoda::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
