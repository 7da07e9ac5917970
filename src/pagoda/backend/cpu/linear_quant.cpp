// Quantized linear weights on the CPU: a chunk of rows is dequantized into fp32 (value = (q - z) * s,
// q * s - offset, or fp8(q) * s, in fp32 exactly as the formats define it), then the shared row-chunk product
// (linear_by_row_chunks) multiplies it with the activations; W8A8 weights first turn the activations into their
// FP8 values. Weights converted from GGUF blocks (ActivationQuant::kInt8Block) go to the integer kernels of
// linear_w4_int8.cpp (4-bit) and linear_w8_int8.cpp (5- and 6-bit) instead, where their shape allows
// (otherwise here, with fp32 inputs).
#include "pagoda/backend/cpu/linear_quant.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "pagoda/backend/cpu/cpu_kernels.h"
#include "pagoda/backend/cpu/linear_w4_int8.h"
#include "pagoda/backend/cpu/linear_w8_int8.h"
#include "pagoda/core/check.h"
#include "pagoda/core/dtype.h"

namespace pagoda::cpu {
namespace {

// Calls fn(g, c0, c1) for each run of columns [c0, c1) in one group g: runs of group_size columns, or, for
// act-order GPTQ, runs of equal g_idx. The inner loops then have no per-column division or lookup, so they
// vectorize (the arithmetic per value is unchanged).
template <typename Fn>
inline void for_each_group_run(const Weight& w, int64_t k, Fn&& fn) {
  if (w.g_idx.empty()) {
    for (int64_t c0 = 0, g = 0; c0 < k; c0 += w.group_size, ++g) fn(g, c0, std::min(k, c0 + w.group_size));
    return;
  }
  const int32_t* g_idx = w.g_idx.ptr<const int32_t>();
  for (int64_t c0 = 0; c0 < k;) {
    int64_t c1 = c0 + 1;
    while (c1 < k && g_idx[c1] == g_idx[c0]) ++c1;
    fn(g_idx[c0], c0, c1);
    c0 = c1;
  }
}

// The codes of 16 columns from the 8 bytes that hold them (low nibble first), as two vectors of 8 int32: each
// byte widened to 16 bits, its high nibble moved into the upper byte, so the bytes read in column order.
inline void int4_codes16(const uint8_t* bytes, __m256i& first8, __m256i& next8) {
  const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes)));
  const __m128i nibbles = _mm_or_si128(_mm_and_si128(b, _mm_set1_epi16(0x0f)), _mm_slli_epi16(_mm_srli_epi16(b, 4), 8));
  first8 = _mm256_cvtepu8_epi32(nibbles);
  next8 = _mm256_cvtepu8_epi32(_mm_srli_si128(nibbles, 8));
}

// (q - z) * s and q * s - offset for 8 codes, in the scalar loops' order of fp32 operations.
inline __m256 zero_point_values(__m256i q, __m256i zero, __m256 scale) {
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, zero)), scale);
}
inline __m256 offset_values(__m256i q, __m256 scale, __m256 offset) {
  return _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(q), scale), offset);
}

// data U8 [N, K/2] (k even in the low nibble), scales F32 [N, groups], and zeros U8 [N, groups] (value =
// (q - z) * s) or offsets F32 [N, groups] (value = q * s - offset). 16 columns at a time where a run starts on
// an even column; the scalar loop finishes each run.
void dequantize_int4_rows(const Weight& w, int64_t row, int64_t count, float* out) {
  const int64_t k = w.in_features, groups = w.scales.dim(1);
  const bool offsets = !w.offsets.empty();
  for (int64_t r = row; r < row + count; ++r, out += k) {
    const uint8_t* codes = w.data.ptr<const uint8_t>() + r * (k / 2);
    const float* s = w.scales.ptr<const float>() + r * groups;
    const float* m = offsets ? w.offsets.ptr<const float>() + r * groups : nullptr;
    const uint8_t* z = offsets ? nullptr : w.zeros.ptr<const uint8_t>() + r * groups;
    for_each_group_run(w, k, [&](int64_t g, int64_t c0, int64_t c1) {
      const float scale = s[g];
      const __m256 scale8 = _mm256_set1_ps(scale);
      int64_t c = c0;
      if (offsets) {
        const float offset = m[g];
        const __m256 offset8 = _mm256_set1_ps(offset);
        for (; c0 % 2 == 0 && c + 16 <= c1; c += 16) {
          __m256i first8, next8;
          int4_codes16(codes + c / 2, first8, next8);
          _mm256_storeu_ps(out + c, offset_values(first8, scale8, offset8));
          _mm256_storeu_ps(out + c + 8, offset_values(next8, scale8, offset8));
        }
        for (; c < c1; ++c) out[c] = static_cast<float>((codes[c / 2] >> (4 * (c % 2))) & 0xf) * scale - offset;
      } else {
        const int32_t zero = z[g];
        const __m256i zero8 = _mm256_set1_epi32(zero);
        for (; c0 % 2 == 0 && c + 16 <= c1; c += 16) {
          __m256i first8, next8;
          int4_codes16(codes + c / 2, first8, next8);
          _mm256_storeu_ps(out + c, zero_point_values(first8, zero8, scale8));
          _mm256_storeu_ps(out + c + 8, zero_point_values(next8, zero8, scale8));
        }
        for (; c < c1; ++c)
          out[c] = static_cast<float>(static_cast<int32_t>((codes[c / 2] >> (4 * (c % 2))) & 0xf) - zero) * scale;
      }
    });
  }
}

// data I8 [N, K], scales F32 [N, groups], and zeros I32 [N, groups] or empty (symmetric), or offsets F32
// [N, groups] (value = q * s - offset).
void dequantize_int8_rows(const Weight& w, int64_t row, int64_t count, float* out) {
  const int64_t k = w.in_features, groups = w.scales.dim(1);
  const bool offsets = !w.offsets.empty();
  for (int64_t r = row; r < row + count; ++r, out += k) {
    const int8_t* codes = w.data.ptr<const int8_t>() + r * k;
    const float* s = w.scales.ptr<const float>() + r * groups;
    const float* m = offsets ? w.offsets.ptr<const float>() + r * groups : nullptr;
    const int32_t* z = w.zeros.empty() ? nullptr : w.zeros.ptr<const int32_t>() + r * groups;
    for_each_group_run(w, k, [&](int64_t g, int64_t c0, int64_t c1) {
      const float scale = s[g];
      const __m256 scale8 = _mm256_set1_ps(scale);
      int64_t c = c0;
      const auto codes8 = [&](int64_t at) {
        return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + at)));
      };
      if (offsets) {
        const float offset = m[g];
        const __m256 offset8 = _mm256_set1_ps(offset);
        for (; c + 8 <= c1; c += 8) _mm256_storeu_ps(out + c, offset_values(codes8(c), scale8, offset8));
        for (; c < c1; ++c) out[c] = static_cast<float>(codes[c]) * scale - offset;
      } else {
        const int32_t zero = z ? z[g] : 0;
        const __m256i zero8 = _mm256_set1_epi32(zero);
        for (; c + 8 <= c1; c += 8) _mm256_storeu_ps(out + c, zero_point_values(codes8(c), zero8, scale8));
        for (; c < c1; ++c) out[c] = static_cast<float>(static_cast<int32_t>(codes[c]) - zero) * scale;
      }
    });
  }
}

// data F8_E4M3 [N, K], scales F32 [N, groups] (column c in group c / group_size).
void dequantize_fp8_rows(const Weight& w, int64_t row, int64_t count, float* out) {
  const int64_t k = w.in_features, groups = w.scales.dim(1);
  float lut[256];  // every e4m3 code's value
  for (int v = 0; v < 256; ++v) lut[v] = f8e4m3_to_f32(static_cast<uint8_t>(v));
  for (int64_t r = row; r < row + count; ++r, out += k) {
    const uint8_t* codes = w.data.ptr<const uint8_t>() + r * k;
    const float* s = w.scales.ptr<const float>() + r * groups;
    for (int64_t c = 0; c < k; ++c) out[c] = lut[codes[c]] * s[c / w.group_size];
  }
}

}  // namespace

void dequantize_rows(const Weight& w, int64_t row, int64_t count, float* out) {
  PAGODA_CHECK(row >= 0 && count >= 0 && row + count <= w.num_rows(), "dequantize_rows: rows [{}, {}) of {}", row,
               row + count, w.num_rows());
  PAGODA_CHECK(w.scales.empty() || (w.scales.dtype == DType::kF32 && (w.offsets.empty() || w.offsets.dtype == DType::kF32) &&
                                    (w.scheme != QuantScheme::kInt4Group || w.zeros.empty() != w.offsets.empty()) &&
                                    (w.scheme != QuantScheme::kInt8Channel || w.data.dtype == DType::kI8)),
               "dequantize_rows: a weight in a compact CPU form (backend/cpu/compact_weights.h) is for the integer kernels");
  switch (w.scheme) {
    case QuantScheme::kInt4Group: return dequantize_int4_rows(w, row, count, out);
    case QuantScheme::kInt8Channel: return dequantize_int8_rows(w, row, count, out);
    case QuantScheme::kFp8Channel: return dequantize_fp8_rows(w, row, count, out);
    case QuantScheme::kNone: break;
  }
  PAGODA_CHECK(false, "dequantize_rows: the weight is not quantized (scheme {})", quant_scheme_name(w.scheme));
}

float fp8_activation_scale(const float* x, int64_t k, ActivationQuant a, float input_scale) {
  if (a == ActivationQuant::kFp8Static) return input_scale;
  float amax = 0.0f;
  for (int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(x[c]));
  return std::max(amax / 448.0f, kMinFp8ActivationScale);
}

void quantize_activations_fp8(const float* x, int64_t num_tokens, int64_t k, ActivationQuant a, float input_scale,
                              float* out) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* row = x + t * k;
    const float s = fp8_activation_scale(row, k, a, input_scale), inv = 1.0f / s;
    for (int64_t c = 0; c < k; ++c) out[t * k + c] = f8e4m3_to_f32(f32_to_e4m3_saturating(row[c] * inv)) * s;
  }
}

void linear_quant_f32(float* out, const float* x, int64_t num_tokens, const Weight& w) {
  if (is_int8_activations(w.activations) && linear_w4_int8_supported(w)) return linear_w4_int8(out, x, num_tokens, w);
  if (is_int8_activations(w.activations) && linear_w8_int8_supported(w))
    return linear_w8_int8(out, x, num_tokens, w);
  std::vector<float> quantized;  // W8A8: the inputs as their FP8 values
  if (is_fp8_activations(w.activations)) {
    quantized.resize(static_cast<size_t>(num_tokens * w.in_features));
    quantize_activations_fp8(x, num_tokens, w.in_features, w.activations, w.input_scale, quantized.data());
    x = quantized.data();
  }
  linear_by_row_chunks(out, x, num_tokens, w.num_rows(), w.in_features,
                       [&](int64_t r0, int64_t nr, float* scratch) -> const float* {
                         dequantize_rows(w, r0, nr, scratch);  // [nr, K] fp32
                         return scratch;
                       });
}

}  // namespace pagoda::cpu
