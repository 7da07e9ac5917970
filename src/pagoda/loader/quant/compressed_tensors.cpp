// compressed-tensors checkpoints (llm-compressor) -> kInt4Group, kInt8Channel or kFp8Channel.
// pack-quantized (symmetric int, 4 or 8 bits):
//   weight_packed I32 [N, K*b/32]  row n is a bit stream: code k at bits k*b .. k*b + b - 1, stored q + 2^(b-1)
//   weight_scale  F32 [N, K/G] (strategy group) or [N, 1] (channel), in the model dtype
//   weight_shape  I64 [2] = [N, K]
// float-quantized (FP8): see fp8.cpp, shared with ModelOpt and fp8 checkpoints.
// value = q * s (compressed-tensors compressors/pack_quantized, lifecycle/forward.py `_dequantize`; FORMATS.md).
#include <fmt/format.h>

#include <cstring>

#include "pagoda/core/error.h"
#include "pagoda/loader/quant/quant_tensors.h"

namespace pagoda {
namespace {

using namespace quant;

const std::initializer_list<DType> kScaleDtypes = {DType::kF32, DType::kF16, DType::kBF16};

Weight convert_pack_quantized(const QuantLinearSource& src, const QuantConfig& config,
                              std::vector<HostTensor>& owned) {
  const int64_t n = src.n, k = src.k;
  const int bits = config.bits;
  if ((k * bits) % 32 != 0) fail(src, "weight_packed", fmt::format("cannot pack in_features {} at {} bits", k, bits));
  const int64_t groups = num_groups(src, config.group_size, "config_groups weights.group_size");
  const SafetensorsTensor& packed = require(src, "weight_packed", {DType::kI32}, {n, k * bits / 32});
  const SafetensorsTensor& scales = require(src, "weight_scale", kScaleDtypes, {n, groups});
  const SafetensorsTensor& shape = require(src, "weight_shape", {DType::kI64, DType::kI32}, {2});
  for (int i = 0; i < 2; ++i) {
    int64_t dim = 0;
    if (shape.dtype == DType::kI64)
      std::memcpy(&dim, shape.data + 8 * i, 8);
    else
      dim = static_cast<int32_t>(word(shape, i));
    if (dim != (i == 0 ? n : k))
      fail(src, "weight_shape", fmt::format("says [{}] = {}, but the config gives [{}, {}]", i, dim, n, k));
  }
  if (find(src, "weight_zero_point") != nullptr)
    fail(src, "weight_zero_point", "is present: only symmetric pack-quantized weights are supported");
  if (find(src, "weight_g_idx") != nullptr) fail(src, "weight_g_idx", "is present: activation ordering is not supported");

  const bool int4 = bits == 4;
  const int64_t words_per_row = k * bits / 32;
  const int64_t per_word = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const int32_t offset = 1 << (bits - 1);  // codes are stored unsigned: q + 2^(b-1)
  QuantWeightBuilder out(int4 ? QuantScheme::kInt4Group : QuantScheme::kInt8Channel, int4 ? DType::kU8 : DType::kI8,
                         n, k, config.group_size, int4, DType::kU8, owned);
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t w = 0; w < words_per_row; ++w) {
      const uint32_t bits_word = word(packed, row * words_per_row + w);
      for (int64_t j = 0; j < per_word; ++j) {
        const uint32_t u = (bits_word >> (bits * j)) & mask;
        if (int4)
          out.set_int4(row, w * per_word + j, u);  // kept unsigned, zero point 8
        else
          out.set_int8(row, w * per_word + j, static_cast<int8_t>(static_cast<int32_t>(u) - offset));
      }
    }
    for (int64_t g = 0; g < groups; ++g) {
      out.set_scale(row, g, float_at(scales, row * groups + g));
      if (int4) out.set_zero(row, g, offset);
    }
  }
  return out.finish();
}

}  // namespace

Weight convert_compressed_tensors_linear(const QuantLinearSource& src, const QuantConfig& config,
                                         std::vector<HostTensor>& owned) {
  return config.is_float ? convert_fp8_linear(src, config, owned) : convert_pack_quantized(src, config, owned);
}

}  // namespace pagoda
