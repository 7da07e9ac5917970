// Pieces the integer kernels share across their translation units, AVX2 and AVX-512 alike. Internal linkage
// (an anonymous namespace): each file that includes this compiles its own copy for its own instruction set,
// so no copy compiled for AVX-512 can be chosen by the linker for an AVX2 caller. Include it after the file's
// `#pragma GCC target`, where it has one.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "pagoda/backend/cpu/group_values.h"

namespace pagoda::cpu {
namespace {

// The reduction of 8 partial sums every 8-lane kernel uses (simd.h's hsum, the same tree).
inline float hsum8(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// A block of 32 activations as llama.cpp's Q8_0 quantizes it: scale d = amax / 127, values round(x * inv)
// with inv = 1 / d (0 where d = 0), rounded to nearest even (as lrintf). In AVX2 registers, with no library
// calls: GCC leaves std::fmax and std::lrintf as calls into libm, and with them this loop took half as long as
// the W8 decode product it feeds (docs/PERFORMANCE.md). A NaN input is ignored by the amax, as std::max did.
struct Q8Block {
  float d;
  alignas(32) int32_t v[32];
};
inline void q8_block(const float* x, Q8Block& out) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 xs[4], amax = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    xs[i] = _mm256_loadu_ps(x + 8 * i);
    amax = _mm256_max_ps(_mm256_andnot_ps(sign, xs[i]), amax);  // a NaN |x| gives amax (the second operand)
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  const float d = _mm_cvtss_f32(m) / 127.0f;
  const __m256 inv = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
  for (int i = 0; i < 4; ++i)
    _mm256_store_si256(reinterpret_cast<__m256i*>(out.v + 8 * i), _mm256_cvtps_epi32(_mm256_mul_ps(xs[i], inv)));
  out.d = d;
}

// The 32 codes of a 4-bit block from its 16 bytes (low nibble first), in column order: each byte widened to
// 16 bits with its high nibble moved into the upper byte.
inline __m256i int4_codes32(const uint8_t* bytes) {
  const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
  return _mm256_or_si256(_mm256_and_si256(b, _mm256_set1_epi16(0x0f)), _mm256_slli_epi16(_mm256_srli_epi16(b, 4), 8));
}

// `count` bytes (1..8) from p as the low bytes of an integer, the rest 0: no call for any count (a memcpy of a
// variable size is one), and one load for the counts whole chunks have.
inline uint64_t load_low_bytes(const void* p, int64_t count) {
  switch (count) {
    case 8: { uint64_t v; std::memcpy(&v, p, 8); return v; }
    case 4: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case 2: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case 1: return *static_cast<const uint8_t*>(p);
    default: break;
  }
  uint64_t v = 0;
  for (int64_t i = 0; i < count; ++i) v |= static_cast<uint64_t>(static_cast<const uint8_t*>(p)[i]) << (8 * i);
  return v;
}

// The fp32 values of groups [g0, g0 + count) of row `row` (count 1..4, all under one base; at = row * groups +
// g0), the lanes past count 0: the values the loader's fp32 arrays hold, from form F of group_values.h.
template <GroupValues::Form F>
inline __m128 load_group_values(const GroupValues& v, int64_t row, int64_t at, int64_t g0, int64_t count) {
  if constexpr (F == GroupValues::Form::kF16) {
    return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(
        load_low_bytes(static_cast<const uint16_t*>(v.values) + at, 2 * count))));
  } else if constexpr (F == GroupValues::Form::kScaledI8) {
    const __m128i codes = _mm_cvtepi8_epi32(_mm_cvtsi32_si128(static_cast<int32_t>(
        load_low_bytes(static_cast<const int8_t*>(v.values) + at, count))));
    return _mm_mul_ps(_mm_cvtepi32_ps(codes), _mm_set1_ps(v.base_of(row, g0)));
  } else {
    const float* p = static_cast<const float*>(v.values) + at;
    if (count == 4) return _mm_loadu_ps(p);
    return _mm_maskload_ps(p, _mm_cmpgt_epi32(_mm_set1_epi32(static_cast<int32_t>(count)), _mm_setr_epi32(0, 1, 2, 3)));
  }
}

// load_group_values for the AVX-512 files (AVX512BW and VL): each form one masked load, no branch on the count
// in the streamed loops. `groups`: the first `count` bits. A template, so that the AVX2 files, which never call
// it, compile no AVX-512 instruction.
template <GroupValues::Form F>
inline __m128 load_group_values_avx512(const GroupValues& v, int64_t row, int64_t at, int64_t g0, __mmask8 groups) {
  if constexpr (F == GroupValues::Form::kF16) {
    return _mm_cvtph_ps(_mm_maskz_loadu_epi16(groups, static_cast<const uint16_t*>(v.values) + at));
  } else if constexpr (F == GroupValues::Form::kScaledI8) {
    const __m128i codes = _mm_cvtepi8_epi32(_mm_maskz_loadu_epi8(groups, static_cast<const int8_t*>(v.values) + at));
    return _mm_mul_ps(_mm_cvtepi32_ps(codes), _mm_set1_ps(v.base_of(row, g0)));
  } else {
    return _mm_maskz_loadu_ps(groups, static_cast<const float*>(v.values) + at);
  }
}

}  // namespace
}  // namespace pagoda::cpu
