// Pieces the integer kernels share across their translation units, AVX2 and AVX-512 alike. Internal linkage
// (an anonymous namespace): each file that includes this compiles its own copy for its own instruction set,
// so no copy compiled for AVX-512 can be chosen by the linker for an AVX2 caller. Include it after the file's
// `#pragma GCC target`, where it has one.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

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
// with inv = 1 / d (0 where d = 0).
struct Q8BlockScale {
  float d, inv;
};
inline Q8BlockScale q8_block_scale(const float* x) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  return Q8BlockScale{d, d != 0.0f ? 1.0f / d : 0.0f};
}

// The 32 codes of a 4-bit block from its 16 bytes (low nibble first), in column order: each byte widened to
// 16 bits with its high nibble moved into the upper byte.
inline __m256i int4_codes32(const uint8_t* bytes) {
  const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
  return _mm256_or_si256(_mm256_and_si256(b, _mm256_set1_epi16(0x0f)), _mm256_slli_epi16(_mm256_srli_epi16(b, 4), 8));
}

}  // namespace
}  // namespace pagoda::cpu
