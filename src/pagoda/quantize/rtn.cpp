// The quantizers' arithmetic. Each step is one fp32 operation in the tools' order, so that the codes (and
// the files) come out bit for bit the same as the reference packer's.
#include "pagoda/quantize/rtn.h"

#include <algorithm>
#include <cmath>

namespace pagoda::quantizer {
namespace {

float rne(float x) { return std::nearbyint(x); }  // the default rounding mode: half to even

struct AsymParams {
  float scale;
  float zero;
};

AsymParams asym_params(const float* g, int64_t size) {
  float mx = g[0], mn = g[0];
  for (int64_t j = 1; j < size; ++j) {
    mx = std::max(mx, g[j]);
    mn = std::min(mn, g[j]);
  }
  const float s = std::max(mx - mn, 1e-5f) / 15.0f;
  const float z = std::clamp(-rne(mn / s), 0.0f, 15.0f);
  return {s, z};
}

float asym_code(float w, AsymParams p) { return std::clamp(rne(w / p.scale) + p.zero, 0.0f, 15.0f); }

}  // namespace

AsymGroupCodes quantize_asym_groups(const Matrix& w, int64_t group_size) {
  AsymGroupCodes q{w.rows, w.cols, group_size, {}, {}, {}};
  const int64_t groups = w.cols / group_size;
  q.codes.resize(static_cast<size_t>(w.rows * w.cols));
  q.zeros.resize(static_cast<size_t>(w.rows * groups));
  q.scales.resize(static_cast<size_t>(w.rows * groups));
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      const float* src = w.row(r) + g * group_size;
      const AsymParams p = asym_params(src, group_size);
      q.scales[r * groups + g] = p.scale;
      q.zeros[r * groups + g] = static_cast<uint8_t>(p.zero);
      for (int64_t j = 0; j < group_size; ++j)
        q.codes[r * w.cols + g * group_size + j] = static_cast<uint8_t>(asym_code(src[j], p));
    }
  return q;
}

void fake_quantize_asym_groups(float* w, int64_t n, int64_t k, int64_t group_size) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < k / group_size; ++g) {
      float* x = w + r * k + g * group_size;
      const AsymParams p = asym_params(x, group_size);
      for (int64_t j = 0; j < group_size; ++j) x[j] = (asym_code(x[j], p) - p.zero) * p.scale;
    }
}

Matrix dequantize_awq(const AsymGroupCodes& q) {
  Matrix out(q.n, q.k);
  const int64_t groups = q.k / q.group_size;
  for (int64_t r = 0; r < q.n; ++r)
    for (int64_t c = 0; c < q.k; ++c) {
      const int64_t g = r * groups + c / q.group_size;
      const float s16 = round_to_dtype(q.scales[g], DType::kF16);
      out.at(r, c) = (static_cast<float>(q.codes[r * q.k + c]) - static_cast<float>(q.zeros[g])) * s16;
    }
  return out;
}

SymCodes quantize_sym_int(const Matrix& w, int bits, int64_t group_size, DType scale_dtype) {
  const int64_t g_size = group_size == 0 ? w.cols : group_size;
  const int64_t groups = w.cols / g_size;
  const float qmin = -static_cast<float>(1 << (bits - 1)), qmax = static_cast<float>((1 << (bits - 1)) - 1);
  const float half_range = (qmax - qmin) / 2.0f;  // 7.5 or 127.5
  SymCodes q{bits, w.rows, w.cols, g_size, {}, {}};
  q.codes.resize(static_cast<size_t>(w.rows * w.cols));
  q.scales.resize(static_cast<size_t>(w.rows * groups));
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      const float* src = w.row(r) + g * g_size;
      float mn = 0.0f, mx = 0.0f;  // the range always includes 0
      for (int64_t j = 0; j < g_size; ++j) {
        mn = std::min(mn, src[j]);
        mx = std::max(mx, src[j]);
      }
      float s = round_to_dtype(std::max(std::fabs(mn), std::fabs(mx)) / half_range, scale_dtype);
      if (s == 0.0f) s = dtype_epsilon(scale_dtype);
      q.scales[r * groups + g] = s;
      for (int64_t j = 0; j < g_size; ++j)
        q.codes[r * w.cols + g * g_size + j] = static_cast<int8_t>(rne(std::clamp(src[j] / s, qmin, qmax)));
    }
  return q;
}

Matrix dequantize_sym(const SymCodes& q) {
  Matrix out(q.n, q.k);
  const int64_t groups = q.k / q.group_size;
  for (int64_t r = 0; r < q.n; ++r)
    for (int64_t c = 0; c < q.k; ++c)
      out.at(r, c) = static_cast<float>(q.codes[r * q.k + c]) * q.scales[r * groups + c / q.group_size];
  return out;
}

Fp8Codes quantize_fp8_channel(const Matrix& w, DType scale_dtype) {
  Fp8Codes q{w.rows, w.cols, {}, {}};
  q.codes.resize(static_cast<size_t>(w.rows * w.cols));
  q.scales.resize(static_cast<size_t>(w.rows));
  for (int64_t r = 0; r < w.rows; ++r) {
    const float* src = w.row(r);
    float mn = 0.0f, mx = 0.0f;
    for (int64_t j = 0; j < w.cols; ++j) {
      mn = std::min(mn, src[j]);
      mx = std::max(mx, src[j]);
    }
    float s = round_to_dtype(std::max(std::fabs(mn), std::fabs(mx)) / 448.0f, scale_dtype);
    if (s == 0.0f) s = dtype_epsilon(scale_dtype);
    q.scales[r] = s;
    for (int64_t j = 0; j < w.cols; ++j)
      q.codes[r * w.cols + j] = f32_to_e4m3_saturating(std::clamp(src[j] / s, -448.0f, 448.0f));
  }
  return q;
}

Matrix dequantize_fp8(const Fp8Codes& q) {
  Matrix out(q.n, q.k);
  for (int64_t r = 0; r < q.n; ++r)
    for (int64_t c = 0; c < q.k; ++c) out.at(r, c) = f8e4m3_to_f32(q.codes[r * q.k + c]) * q.scales[r];
  return out;
}

float round_to_dtype(float x, DType dtype) {
  switch (dtype) {
    case DType::kF16: return f16_to_f32(f32_to_f16(x));
    case DType::kBF16: return bf16_to_f32(f32_to_bf16(x));
    default: return x;
  }
}

float dtype_epsilon(DType dtype) {
  switch (dtype) {
    case DType::kF16: return 0.0009765625f;  // 2^-10
    case DType::kBF16: return 0.0078125f;    // 2^-7
    default: return 1.1920929e-07f;          // 2^-23
  }
}

}  // namespace pagoda::quantizer
