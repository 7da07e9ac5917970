// fp16 rounding on the CPU through F16C (every x86-64-v3 CPU has it), to nearest even: the value an fp16 product
// input holds, and rows stored as fp16 (--kv-cache-dtype fp16). Internal linkage, so a file compiled for AVX-512
// (int8_lanes.h is read after such files' target pragma) builds its own copy and none is linked into AVX2 code.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace pagoda::cpu {
namespace {

// x rounded to fp16 and back.
inline float round_to_fp16(float x) { return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT)); }

// out[0, n) = x rounded to fp16, 8 at a time.
inline void store_fp16(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) out[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

}  // namespace
}  // namespace pagoda::cpu
