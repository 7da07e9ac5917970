// quantize_lm_head_fp8 (lm_head_quant.h).
#include "pagoda/loader/lm_head_quant.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "pagoda/core/check.h"
#include "pagoda/core/dtype.h"

namespace pagoda {
namespace {

float value_at(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::kF32: return t.ptr<const float>()[i];
    case DType::kF16: return f16_to_f32(t.ptr<const uint16_t>()[i]);
    case DType::kBF16: return bf16_to_f32(t.ptr<const uint16_t>()[i]);
    default: PAGODA_CHECK(false, "lm_head dtype {}", dtype_name(t.dtype));
  }
  return 0.0f;
}

}  // namespace

bool quantize_lm_head_fp8(Weight& lm_head, std::vector<HostTensor>& owned) {
  const Tensor& src = lm_head.data;
  if (lm_head.quantized() || src.ndim != 2 ||
      (src.dtype != DType::kF32 && src.dtype != DType::kF16 && src.dtype != DType::kBF16))
    return false;
  const int64_t n = src.dim(0), k = src.dim(1);
  Weight w;
  w.scheme = QuantScheme::kFp8Channel;
  w.in_features = k;
  w.group_size = k;
  w.activations = ActivationQuant::kFp8PerToken;
  w.source_format = "fp8 (--quantize-lm-head)";
  w.data = owned.emplace_back(DType::kF8E4M3, std::initializer_list<int64_t>{n, k}).view();
  w.scales = owned.emplace_back(DType::kF32, std::initializer_list<int64_t>{n, 1}).view();
  auto* codes = w.data.ptr<uint8_t>();
  float* scales = w.scales.ptr<float>();
  auto rows = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float amax = 0.0f;
      for (int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(value_at(src, r * k + c)));
      const float s = amax > 0.0f ? amax / 448.0f : 1.0f;
      scales[r] = s;
      for (int64_t c = 0; c < k; ++c) codes[r * k + c] = f32_to_e4m3_saturating(value_at(src, r * k + c) / s);
    }
  };
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(std::thread::hardware_concurrency(), n));
  {
    std::vector<std::jthread> pool;
    for (int64_t i = 0; i < threads; ++i) pool.emplace_back(rows, n * i / threads, n * (i + 1) / threads);
  }
  lm_head = w;
  return true;
}

}  // namespace pagoda
