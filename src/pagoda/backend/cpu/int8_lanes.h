// Pieces the integer kernels share across their translation units, AVX2 and AVX-512 alike. Internal linkage
// (an anonymous namespace): each file that includes this compiles its own copy for its own instruction set,
// so no copy compiled for AVX-512 can be chosen by the linker for an AVX2 caller. Include it after the file's
// `#pragma GCC target`, where it has one.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "pagoda/backend/cpu/fp16_rounding.h"
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

// How llama.cpp quantizes a linear's inputs for the weight's block type (its `vec_dot_type`), in blocks of 32
// here (a Q8_K block is 8 of them under one scale). In AVX2 registers, with no library calls: GCC leaves
// std::fmax and std::lrintf as calls into libm, and with them this loop took half as long as the W8 decode
// product it feeds (docs/PERFORMANCE.md).
enum class Q8Rule : uint8_t {
  kQ8_0,  // Q4_0, Q5_0, Q8_0: per 32 values d = amax / 127 kept in fp16, values x * (127 / amax) rounded to
          // nearest even (llama.cpp's AVX2 quantize_row_q8_0)
  kQ8_1,  // Q4_1, Q5_1: as kQ8_0, and the block's d * sum(values) kept in fp16 (what the weight's offset multiplies)
  kQ8_K,  // the k-quants: per 256 values iscale = -127 / (the first value of the largest magnitude), values
          // min(127, x * iscale rounded to nearest even), d = 1 / iscale in fp32 (quantize_row_q8_K_ref)
};

// The rule of a weight's inputs: Q8_K for the k-quants' (`superblocks`: ActivationQuant::kInt8SuperBlock), Q8_1
// for offsets of whole blocks of 32 (Q4_1, Q5_1: a block's d * sum(v) meets one offset), Q8_0 otherwise. Plain
// arguments: this header adds no include that a file compiled for AVX-512 would build inline functions of.
inline Q8Rule q8_rule(bool superblocks, bool offsets, int64_t group_size) {
  if (superblocks) return Q8Rule::kQ8_K;
  return offsets && group_size % 32 == 0 ? Q8Rule::kQ8_1 : Q8Rule::kQ8_0;
}

// How many activations one scale covers under `rule`.
constexpr int64_t q8_rule_block(Q8Rule rule) { return rule == Q8Rule::kQ8_K ? 256 : 32; }

struct Q8Block {
  float d;            // the values' scale
  float sd;           // kQ8_1: d * sum(v) in fp16; 0 otherwise (each lane's own sum times d is what offsets take)
  alignas(32) int32_t v[32];
};

// The largest |x| of 8n values (a NaN |x| is ignored, as std::max did).
inline float amax_of(const float* x, int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 amax = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) amax = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), amax);
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// out.v = x * mul rounded to nearest even (the MXCSR default, as llama.cpp's round and nearest_int), at most 127.
inline void q8_values(const float* x, float mul, Q8Block& out) {
  const __m256 m = _mm256_set1_ps(mul);
  const __m256i top = _mm256_set1_epi32(127);
  for (int i = 0; i < 4; ++i) {
    const __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), m));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out.v + 8 * i), _mm256_min_epi32(v, top));
  }
}

// The q8_rule_block(rule) / 32 blocks of one scale, from x (that many values).
inline void q8_blocks(const float* x, Q8Rule rule, Q8Block* out) {
  if (rule == Q8Rule::kQ8_K) {
    const float amax = amax_of(x, 256);
    float max = 0.0f;  // the first value of magnitude amax, its sign kept
    for (int j = 0; j < 256 && amax != 0.0f; ++j)
      if (x[j] == amax || x[j] == -amax) {
        max = x[j];
        break;
      }
    const float iscale = max != 0.0f ? -127.0f / max : 0.0f;
    for (int b = 0; b < 8; ++b) {
      q8_values(x + 32 * b, iscale, out[b]);
      out[b].d = max != 0.0f ? 1.0f / iscale : 0.0f;
      out[b].sd = 0.0f;
    }
    return;
  }
  const float amax = amax_of(x, 32);
  q8_values(x, amax != 0.0f ? 127.0f / amax : 0.0f, out[0]);
  const float d = amax / 127.0f;
  out[0].d = round_to_fp16(d);
  out[0].sd = 0.0f;
  if (rule == Q8Rule::kQ8_1) {
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += out[0].v[j];
    out[0].sd = round_to_fp16(d * static_cast<float>(sum));
  }
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

// The group values a streamed row reads are a second stream beside its codes (an eighth of their bytes for a
// Q4_0 file's fp16 scales): left to the hardware, each row's first touch of them waits on memory. The streamed
// loops prefetch the values kGroupValuesPrefetchGroups groups ahead of group `at` (2,048 columns with groups of
// 32): TinyLlama generation +3.7% (Q4_0), +7.1% (Q8_0), +5.3% (Q4_K_M) in alternating pairs (docs/PERFORMANCE.md).
// How far ahead of a streamed row's codes the loops (AVX2 and AVX-512) prefetch them: 4,096 columns of 4-bit
// codes, 1,024 of 8-bit ones.
constexpr int64_t kW4CodesPrefetchBytes = 2048;
constexpr int64_t kW8CodesPrefetchBytes = 1024;
constexpr int64_t kGroupValuesPrefetchGroups = 64;
template <GroupValues::Form F>
inline void prefetch_group_values(const GroupValues& v, int64_t row, int64_t at, int64_t g0) {
  constexpr int64_t size = F == GroupValues::Form::kF32 ? 4 : F == GroupValues::Form::kF16 ? 2 : 1;
  _mm_prefetch(static_cast<const char*>(v.values) + (at + kGroupValuesPrefetchGroups) * size, _MM_HINT_T0);
  if constexpr (F == GroupValues::Form::kScaledI8)  // and the bases (a float per 256 columns), as far ahead
    _mm_prefetch(reinterpret_cast<const char*>(v.base + row * v.bases_per_row + ((g0 + kGroupValuesPrefetchGroups) >> v.base_shift)),
                 _MM_HINT_T0);
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
