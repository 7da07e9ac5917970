// AutoAWQ GEMM checkpoints (WQLinear_GEMM) -> kInt4Group.
//   qweight I32 [K, N/8]   word c of row k holds columns 8c + kAwqOrder[i] in nibble i (bits 4i..4i+3)
//   qzeros  I32 [G', N/8]  the same packing, one row per group (G' = K / group_size), zero points as-is
//   scales  F16 [G', N]
// value = (q - z) * s (AutoAWQ awq/modules/linear/gemm.py; FORMATS.md).
#include <fmt/format.h>

#include "pagoda/core/error.h"
#include "pagoda/loader/quant/quant_tensors.h"

namespace pagoda {
namespace {

// Nibble i of a packed word holds column 8c + kAwqOrder[i]: AutoAWQ packs columns [0, 2, 4, 6, 1, 3, 5, 7]
// in that order so that its GEMM kernel's unpacking lands them in place.
constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

}  // namespace

Weight convert_awq_linear(const QuantLinearSource& src, const QuantConfig& config, std::vector<HostTensor>& owned) {
  using namespace quant;
  const int64_t n = src.n, k = src.k;
  if (n % 8 != 0) fail(src, "qweight", fmt::format("cannot pack out_features {} (not a multiple of 8)", n));
  if (k % 2 != 0) fail(src, "qweight", fmt::format("in_features {} is odd: int4 rows hold pairs of codes", k));
  const int64_t groups = num_groups(src, config.group_size, "quantization_config.group_size");
  const SafetensorsTensor& qweight = require(src, "qweight", {DType::kI32}, {k, n / 8});
  const SafetensorsTensor& qzeros = require(src, "qzeros", {DType::kI32}, {groups, n / 8});
  const SafetensorsTensor& scales = require(src, "scales", {DType::kF16, DType::kBF16, DType::kF32}, {groups, n});

  QuantWeightBuilder out(QuantScheme::kInt4Group, DType::kU8, n, k, config.group_size, true, DType::kU8, owned);
  for (int64_t row = 0; row < k; ++row)
    for (int64_t c = 0; c < n / 8; ++c) {
      const uint32_t packed = word(qweight, row * (n / 8) + c);
      for (int i = 0; i < 8; ++i) out.set_int4(8 * c + kAwqOrder[i], row, (packed >> (4 * i)) & 0xfu);
    }
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < n / 8; ++c) {
      const uint32_t packed = word(qzeros, g * (n / 8) + c);
      for (int i = 0; i < 8; ++i) out.set_zero(8 * c + kAwqOrder[i], g, static_cast<int32_t>((packed >> (4 * i)) & 0xfu));
    }
    for (int64_t col = 0; col < n; ++col) out.set_scale(col, g, float_at(scales, g * n + col));
  }
  out.set_source_format(intern_source_format(fmt::format("awq gemm {}", group_text(config.group_size))));
  return out.finish();
}

}  // namespace pagoda
