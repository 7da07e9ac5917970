// 8-bit x int8-block dot products with AVX512-VNNI, one 64-column chunk a 512-bit register (the lanes of
// linear_w8_int8.h): vpdpbusd of the token's values + 128 against the signed codes, started from -128 x (the
// lane's codes added), leaves each lane's exact int32 sum; then the lane's scales in fp32, as the AVX2 loops do.
//
// AVX-512 code generation is switched on after the includes, for this file's own functions only (see
// linear_avx512.cpp for why).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "pagoda/backend/cpu/linear_w8_int8.h"
#include "pagoda/backend/cpu/register_pin.h"

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


struct Chunk {  // a chunk's valid code bytes and groups (1 to 4) as load masks, and its first group
  __mmask64 code_bytes;
  __mmask8 groups;
  int64_t group0;
};

// No division for whole chunks of the common group sizes (a divide per chunk cost as much as the chunk's
// vector work).
inline Chunk chunk_at(const W8Rows& w, int64_t c) {
  const int64_t gs = w.group_size;
  if (kW8Chunk * (c + 1) <= w.k) {
    if (gs == 16) return Chunk{~__mmask64{0}, 0xf, 4 * c};
    if (gs == 32) return Chunk{~__mmask64{0}, 0x3, 2 * c};
    return Chunk{~__mmask64{0}, 0x1, gs == w.k ? 0 : c * kW8Chunk / gs};
  }
  const int64_t columns = w.k - kW8Chunk * c;
  const int64_t groups = gs >= kW8Chunk ? 1 : (columns + gs - 1) / gs;
  return Chunk{(__mmask64{1} << columns) - 1, static_cast<__mmask8>((1u << groups) - 1), c * kW8Chunk / gs};
}

inline __m512i make_lane_groups(int64_t group_size) {  // per lane, its group's index within the chunk
  alignas(64) int32_t idx[16];
  for (int l = 0; l < 16; ++l) idx[l] = group_size == 16 ? l / 4 : group_size == 32 ? l / 8 : 0;
  return _mm512_load_si512(idx);
}

// Built once per group-size class (16, 32, larger): the per-chunk-of-rows calls only pick one.
inline __m512i lane_groups(int64_t group_size) {
  static const __m512i by_class[3] = {make_lane_groups(16), make_lane_groups(32), make_lane_groups(64)};
  return by_class[group_size == 16 ? 0 : group_size == 32 ? 1 : 2];
}

// A 6-bit chunk (linear_w8_int8.h) as its 64 int8 codes: the first 32 bytes twice, their high nibbles for
// columns 32..63; bits 4-5 from the 16 bytes after them, which hold columns 16i..16i+15 at bits 2i, rotated into
// place in each 128-bit lane i (by 4, 2, 0, -2), the neighbours' bits a rotation brings in masked off.
inline __m512i six_bit_codes(const uint8_t* chunk) {
  const __m512i lo = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk)));
  const __m512i nibbles = _mm512_mask_srli_epi16(lo, __mmask32{0xffff0000u}, lo, 4);
  const __m512i high = _mm512_rolv_epi32(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(chunk + 32))),
                                         _mm512_setr_epi32(4, 4, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0, 30, 30, 30, 30));
  // bits 0-3 from the nibbles, 4-7 from `high` (0xe4: c ? a : b), then bits 6-7 cleared
  const __m512i u = _mm512_and_si512(_mm512_ternarylogic_epi32(nibbles, high, _mm512_set1_epi8(0x0f), 0xe4),
                                     _mm512_set1_epi8(0x3f));
  return _mm512_sub_epi8(u, _mm512_set1_epi8(32));
}

// A row's chunk, unpacked: the codes, the lanes' starting sums -128 x (lane's codes added), scales and offsets.
struct Unpacked {
  __m512i q, start;
  __m512 s, m;
};

using Form = GroupValues::Form;

template <bool kOffsets, Form F>
inline Unpacked unpack(const W8Rows& w, __m512i lane_group, int64_t row, int64_t c, const Chunk& ch) {
  Unpacked u;
  if (w.codes6) {  // whole chunks only
    const uint8_t* codes = w.codes6 + (row * w8_chunks(w.k) + c) * kW6ChunkBytes;
    _mm_prefetch(reinterpret_cast<const char*>(codes) + kW8CodesPrefetchBytes, _MM_HINT_T0);
    u.q = six_bit_codes(codes);
  } else {
    const int8_t* codes = w.codes + row * w.k + c * kW8Chunk;
    _mm_prefetch(reinterpret_cast<const char*>(codes) + kW8CodesPrefetchBytes, _MM_HINT_T0);
    const bool full = ch.code_bytes == ~__mmask64{0};
    u.q = full ? _mm512_loadu_si512(codes) : _mm512_maskz_loadu_epi8(ch.code_bytes, codes);
  }
  const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
  u.start = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), k128, u.q));
  const int64_t g = row * w.groups + ch.group0;
  const auto lanes = [&](const GroupValues& v) {
    return _mm512_permutexvar_ps(lane_group, _mm512_zextps128_ps512(load_group_values_avx512<F>(v, row, g, ch.group0, ch.groups)));
  };
  u.s = lanes(w.scales);
  if constexpr (kOffsets) u.m = lanes(w.offsets);
  return u;
}

inline Unpacked load_prepared(const uint8_t* p, bool offsets) {
  Unpacked u;
  u.q = _mm512_load_si512(p);
  u.start = _mm512_load_si512(p + 64);
  u.s = _mm512_load_ps(reinterpret_cast<const float*>(p + 128));
  if (offsets) u.m = _mm512_load_ps(reinterpret_cast<const float*>(p + 192));
  return u;
}

// R rows from r0 x T tokens from t0, the rows' chunks read from `prepared` (rows from prep_r0): many tokens.
template <int R, int T, bool kOffsets>
inline void tile(const uint8_t* prepared, int64_t r0, int64_t prep_r0, const W8Activations& x, int64_t t0, float* out,
                 int64_t n) {
  __m512 acc[R][T];
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t c = 0; c < x.chunks; ++c) {
    __m512i xv[T];
    __m512 dx[T], sdx[T];
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const int64_t at = (t0 + t) * x.chunks + c;
      xv[t] = _mm512_loadu_si512(x.bytes + at * 64);
      dx[t] = _mm512_loadu_ps(x.dx + at * 16);
      if constexpr (kOffsets) sdx[t] = _mm512_loadu_ps(x.sdx + at * 16);
    }
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      Unpacked u = load_prepared(prepared + ((r0 - prep_r0 + r) * x.chunks + c) * kW8PreparedBytes, kOffsets);
      if constexpr (T > 1) {  // one load of each for the T tokens
        keep_in_registers(u.q, u.start, u.s);
        if constexpr (kOffsets) keep_in_registers(u.m);
      }
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m512i ints = _mm512_dpbusd_epi32(u.start, xv[t], u.q);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ints), _mm512_mul_ps(u.s, dx[t]), acc[r][t]);
        if constexpr (kOffsets) acc[r][t] = _mm512_fnmadd_ps(u.m, sdx[t], acc[r][t]);
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

// One row x T tokens from t0, the row's chunks streamed from memory (a few tokens). Whole chunks of groups of 16,
// 32 or 64 step their addresses instead of working them out per chunk (as linear_w4_vnni.cpp's streamed_row);
// the rest goes through chunk_at. The same values added in the same order as tile()'s.
template <int T, bool kOffsets, bool kSix, Form F>
inline void streamed_row(const W8Rows& w, __m512i lane_group, int64_t row, const W8Activations& x, int64_t t0,
                         float* out, int64_t n) {
  __m512 acc[T];
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const auto add = [&](const Unpacked& u, int64_t c) {
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const int64_t at = (t0 + t) * x.chunks + c;
      const __m512i ints = _mm512_dpbusd_epi32(u.start, _mm512_loadu_si512(x.bytes + at * 64), u.q);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ints), _mm512_mul_ps(u.s, _mm512_loadu_ps(x.dx + at * 16)), acc[t]);
      if constexpr (kOffsets) acc[t] = _mm512_fnmadd_ps(u.m, _mm512_loadu_ps(x.sdx + at * 16), acc[t]);
    }
  };
  int64_t c = 0;
  if (w.group_size <= kW8Chunk) {
    const int64_t whole = w.k / kW8Chunk;
    const int64_t groups_per_chunk = kW8Chunk / w.group_size;  // 4, 2 or 1
    const auto groups = static_cast<__mmask8>((1u << groups_per_chunk) - 1);
    // kSix: the 6-bit form's chunks (kW6ChunkBytes each)
    const auto* codes = kSix ? reinterpret_cast<const char*>(w.codes6 + row * whole * kW6ChunkBytes)
                             : reinterpret_cast<const char*>(w.codes + row * w.k);
    constexpr int64_t chunk_bytes = kSix ? kW6ChunkBytes : kW8Chunk;
    const int64_t row_groups = row * w.groups;  // the row's first group
    const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
    Unpacked u;
    for (int64_t g0 = 0; c < whole; ++c, codes += chunk_bytes, g0 += groups_per_chunk) {
      _mm_prefetch(codes + kW8CodesPrefetchBytes, _MM_HINT_T0);
      if constexpr (kSix) u.q = six_bit_codes(reinterpret_cast<const uint8_t*>(codes));
      else u.q = _mm512_loadu_si512(codes);
      u.start = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), k128, u.q));
      const int64_t g = row_groups + g0;
      prefetch_group_values<F>(w.scales, row, g, g0);
      u.s = _mm512_permutexvar_ps(lane_group, _mm512_zextps128_ps512(load_group_values_avx512<F>(w.scales, row, g, g0, groups)));
      if constexpr (kOffsets) {
        prefetch_group_values<F>(w.offsets, row, g, g0);
        u.m = _mm512_permutexvar_ps(lane_group, _mm512_zextps128_ps512(load_group_values_avx512<F>(w.offsets, row, g, g0, groups)));
      }
      add(u, c);
    }
  }
  for (; c < x.chunks; ++c) add(unpack<kOffsets, F>(w, lane_group, row, c, chunk_at(w, c)), c);
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const __m256 lo = _mm512_castps512_ps256(acc[t]);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[t]), 1));
    out[(t0 + t) * n + row] = hsum8(_mm256_add_ps(lo, hi));
  }
}

template <int R, bool kOffsets, bool kPrepared, Form F>
void rows_times_tokens(const W8Rows& w, __m512i lane_group, const uint8_t* prepared, int64_t r0, int64_t prep_r0,
                       const W8Activations& x, int64_t t0, int64_t t1, float* out, int64_t n) {
  int64_t t = t0;
  if constexpr (!kPrepared) {
    static_assert(R == 1, "streamed rows go one at a time");
    const auto streamed = [&]<bool kSix>() {
      for (; t + 3 <= t1; t += 3) streamed_row<3, kOffsets, kSix, F>(w, lane_group, r0, x, t, out, n);
      for (; t < t1; ++t) streamed_row<1, kOffsets, kSix, F>(w, lane_group, r0, x, t, out, n);
    };
    if (w.codes6) streamed.template operator()<true>();
    else streamed.template operator()<false>();
  } else {
    for (; t + 3 <= t1; t += 3) tile<R, 3, kOffsets>(prepared, r0, prep_r0, x, t, out, n);
    for (; t < t1; ++t) tile<R, 1, kOffsets>(prepared, r0, prep_r0, x, t, out, n);
  }
}

// F: the form of the scales and offsets the rows are unpacked from (the prepared rows hold them in fp32).
template <bool kOffsets, bool kPrepared, Form F>
void rows(const W8Rows& w, const uint8_t* prepared, int64_t r0, int64_t count, const W8Activations& x, int64_t t0,
          int64_t t1, float* out, int64_t n) {
  const __m512i lane_group = lane_groups(w.group_size);
  int64_t r = r0;
  // Streamed rows one at a time, in address order (as linear_w4_vnni.cpp: 29-30 GB/s at one token where tiles of
  // 4 rows streamed 22-23; docs/PERFORMANCE.md); prepared rows in tiles of 4.
  if constexpr (kPrepared)
    for (; r + 4 <= r0 + count; r += 4)
      rows_times_tokens<4, kOffsets, kPrepared, F>(w, lane_group, prepared, r, r0, x, t0, t1, out, n);
  for (; r < r0 + count; ++r) rows_times_tokens<1, kOffsets, kPrepared, F>(w, lane_group, prepared, r, r0, x, t0, t1, out, n);
}

}  // namespace

void w8_prepare_rows_vnni(const W8Rows& w, int64_t r0, int64_t count, uint8_t* prepared) {
  const __m512i lane_group = lane_groups(w.group_size);
  const int64_t chunks = w8_chunks(w.k);
  with_form(w.scales.form, [&](auto form) {
    constexpr Form F = decltype(form)::value;
    for (int64_t r = 0; r < count; ++r) {
      for (int64_t c = 0; c < chunks; ++c) {
        const Chunk ch = chunk_at(w, c);
        const Unpacked u = w.offsets ? unpack<true, F>(w, lane_group, r0 + r, c, ch) : unpack<false, F>(w, lane_group, r0 + r, c, ch);
        uint8_t* dst = prepared + (r * chunks + c) * kW8PreparedBytes;
        _mm512_store_si512(dst, u.q);
        _mm512_store_si512(dst + 64, u.start);
        _mm512_store_ps(reinterpret_cast<float*>(dst + 128), u.s);
        if (w.offsets) _mm512_store_ps(reinterpret_cast<float*>(dst + 192), u.m);
      }
    }
  });
}

void w8_rows_times_tokens_vnni(const W8Rows& w, const uint8_t* prepared, int64_t r0, int64_t count,
                               const W8Activations& x, int64_t t0, int64_t t1, float* out, int64_t n) {
  const bool offsets = static_cast<bool>(w.offsets);
  if (prepared != nullptr) {
    return offsets ? rows<true, true, Form::kF32>(w, prepared, r0, count, x, t0, t1, out, n)
                   : rows<false, true, Form::kF32>(w, prepared, r0, count, x, t0, t1, out, n);
  }
  with_form(w.scales.form, [&](auto form) {
    constexpr Form F = decltype(form)::value;
    offsets ? rows<true, false, F>(w, prepared, r0, count, x, t0, t1, out, n)
            : rows<false, false, F>(w, prepared, r0, count, x, t0, t1, out, n);
  });
}

}  // namespace pagoda::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
