// Quantized linear weights on the CPU: a chunk of rows is dequantized into fp32 (value = (q - z) * s,
// q * s - offset, or fp8(q) * s, in fp32 exactly as the formats define it), then the shared row-chunk product
// (linear_by_row_chunks) multiplies it with the activations; W8A8 weights first turn the activations into their
// FP8 values. Readable first: the GPU gets kernels of its own.
#include "pagoda/backend/cpu/linear_quant.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "pagoda/backend/cpu/cpu_kernels.h"
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

// data U8 [N, K/2] (k even in the low nibble), scales F32 [N, groups], and zeros U8 [N, groups] (value =
// (q - z) * s) or offsets F32 [N, groups] (value = q * s - offset).
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
      if (offsets) {
        const float offset = m[g];
        for (int64_t c = c0; c < c1; ++c)
          out[c] = static_cast<float>((codes[c / 2] >> (4 * (c % 2))) & 0xf) * scale - offset;
      } else {
        const int32_t zero = z[g];
        for (int64_t c = c0; c < c1; ++c)
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
      if (offsets) {
        const float offset = m[g];
        for (int64_t c = c0; c < c1; ++c) out[c] = static_cast<float>(codes[c]) * scale - offset;
      } else {
        const int32_t zero = z ? z[g] : 0;
        for (int64_t c = c0; c < c1; ++c) out[c] = static_cast<float>(static_cast<int32_t>(codes[c]) - zero) * scale;
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
  std::vector<float> quantized;  // W8A8: the inputs as their FP8 values
  if (w.activations != ActivationQuant::kNone) {
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
