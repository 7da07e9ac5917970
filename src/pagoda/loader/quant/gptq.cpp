// GPTQ checkpoints (AutoGPTQ / GPTQModel, checkpoint_format gptq or gptq_v2) -> kInt4Group (4-bit) or
// kInt8Channel (8-bit). With b bits and p = 32 / b codes per word:
//   qweight I32 [K/p, N]    code j of word (r, n) is k = p r + j (bits b j .. b j + b - 1)
//   qzeros  I32 [G', N/p]   code j of word (g, c) is column p c + j; v1 stores z - 1, gptq_v2 stores z
//   scales  F16 [G', N]
//   g_idx   I32 [K]         the group of each k (act order when it is not k / group_size); optional
//                           unless desc_act
// value = (q - z) * s (auto_gptq qlinear_cuda_old.py: `scales * (q - (zeros + 1))`; FORMATS.md).
#include <fmt/format.h>

#include "pagoda/core/error.h"
#include "pagoda/loader/quant/quant_tensors.h"

namespace pagoda {

Weight convert_gptq_linear(const QuantLinearSource& src, const QuantConfig& config, std::vector<HostTensor>& owned) {
  using namespace quant;
  const int64_t n = src.n, k = src.k;
  const int bits = config.bits;
  const int64_t per_word = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  if (k % per_word != 0) fail(src, "qweight", fmt::format("cannot pack in_features {} ({} codes per word)", k, per_word));
  if (n % per_word != 0) fail(src, "qzeros", fmt::format("cannot pack out_features {} ({} codes per word)", n, per_word));
  const int64_t groups = num_groups(src, config.group_size, "quantization_config.group_size");
  const SafetensorsTensor& qweight = require(src, "qweight", {DType::kI32}, {k / per_word, n});
  const SafetensorsTensor& qzeros = require(src, "qzeros", {DType::kI32}, {groups, n / per_word});
  const SafetensorsTensor& scales = require(src, "scales", {DType::kF16, DType::kBF16, DType::kF32}, {groups, n});
  const SafetensorsTensor* g_idx = find(src, "g_idx");
  if (g_idx != nullptr) require(src, "g_idx", {DType::kI32}, {k});
  if (g_idx == nullptr && config.desc_act)
    throw LoadError(src.file, fmt::format("missing tensor {} (quantization_config.desc_act is true)",
                                          tensor_name(src, "g_idx")));

  const bool int4 = bits == 4;
  // 8-bit codes and zero points move to the signed domain (q - 128), so the data is I8.
  QuantWeightBuilder out(int4 ? QuantScheme::kInt4Group : QuantScheme::kInt8Channel, int4 ? DType::kU8 : DType::kI8,
                         n, k, config.group_size, true, int4 ? DType::kU8 : DType::kI32, owned);
  const int32_t zero_offset = int4 ? 0 : 128;
  for (int64_t r = 0; r < k / per_word; ++r)
    for (int64_t col = 0; col < n; ++col) {
      const uint32_t packed = word(qweight, r * n + col);
      for (int64_t j = 0; j < per_word; ++j) {
        const uint32_t q = (packed >> (bits * j)) & mask;
        if (int4)
          out.set_int4(col, per_word * r + j, q);
        else
          out.set_int8(col, per_word * r + j, static_cast<int8_t>(static_cast<int32_t>(q) - 128));
      }
    }
  const int32_t stored_offset = config.gptq_v2 ? 0 : 1;  // v1's off-by-one: the file holds z - 1
  // sym: true means every zero point is 2^(bits - 1), and kernels that trust it (vLLM's gptq_marlin) never read
  // qzeros: zero points that say otherwise (a v1 file labelled gptq_v2 reads 7) would give outputs no other
  // engine gives. Refused.
  const int32_t symmetric_zero = 1 << (bits - 1);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < n / per_word; ++c) {
      const uint32_t packed = word(qzeros, g * (n / per_word) + c);
      for (int64_t j = 0; j < per_word; ++j) {
        const auto z = static_cast<int32_t>((packed >> (bits * j)) & mask) + stored_offset;
        if (config.symmetric && z != symmetric_zero)
          fail(src, "qzeros",
               fmt::format("zero point {} (group {}, column {}) but quantization_config.sym is true, which means {}{}", z, g,
                           per_word * c + j, symmetric_zero,
                           z == symmetric_zero - 1 && config.gptq_v2 ? " (a v1 checkpoint labelled gptq_v2?)" : ""));
        out.set_zero(per_word * c + j, g, z - zero_offset);
      }
    }
    for (int64_t col = 0; col < n; ++col) out.set_scale(col, g, float_at(scales, g * n + col));
  }
  if (g_idx != nullptr) out.set_g_idx(*g_idx, tensor_name(src, "g_idx"));
  out.set_source_format(intern_source_format(fmt::format("gptq {} {}-bit {}{} {}", config.gptq_v2 ? "v2" : "v1", bits,
                                                         config.symmetric ? "sym" : "asym",
                                                         config.desc_act ? " act-order" : "",
                                                         group_text(config.group_size))));
  return out.finish();
}

}  // namespace pagoda
