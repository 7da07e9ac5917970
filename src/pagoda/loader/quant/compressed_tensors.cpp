// compressed-tensors checkpoints (llm-compressor) -> kInt4Group, kInt8Channel or kFp8Channel, in the scheme of
// the module's config group (compressed_tensors_config.cpp chooses it). Sources: vllm-project/compressed-tensors
// @ac8e2ba (v0.18.0) compressors/pack_quantized/base.py and helpers.py (pack_to_int32),
// quantization/lifecycle/forward_helpers.py (_process_group, _dequantize), quantization/lifecycle/initialize.py;
// FORMATS.md for the symmetric variants. vLLM reads the same tensors (compressed_tensors_wNa16.py:
// weight_zero_point int32 with packed_dim=0; kernels/mixed_precision/marlin.py @def725a unpacks it as unsigned).
// pack-quantized, b = 4 or 8 bits:
//   weight_packed     I32 [N, K*b/32]  row n is a bit stream: code k at bits k*b .. k*b + b - 1, stored q + 2^(b-1)
//   weight_scale      F32/F16/BF16 [N, K/G] (strategy group) or [N, 1] (channel), in the model dtype
//   weight_shape      I64 [2] = [N, K]
//   weight_zero_point I32 [ceil(N*b/32), K/G or 1], only when symmetric is false: packed along N
//                     (pack_to_int32 packed_dim=0), column g a bit stream with row n's zero point at bits n*b ..,
//                     stored z + 2^(b-1) like the codes (z is signed, in [-2^(b-1), 2^(b-1)): calculate_qparams)
//   weight_g_idx      I32 [K], only with actorder "group": the group of each input column; the codes stay in
//                     natural K order (_process_group permutes the columns by argsort(g_idx), and back)
// value = (q - z) * s, z = 0 when symmetric (_dequantize). Codes and zero points carry the same offset, which
// leaves q - z unchanged: 4-bit ones are kept as stored (0..15), 8-bit ones move to the signed domain.
// float-quantized (FP8): see fp8.cpp, shared with ModelOpt and fp8 checkpoints.
#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "pagoda/core/error.h"
#include "pagoda/loader/quant/quant_tensors.h"

namespace pagoda {
namespace {

using namespace quant;

const std::initializer_list<DType> kScaleDtypes = {DType::kF32, DType::kF16, DType::kBF16};

std::string weights_field(const QuantConfig& config, const std::string& key) {
  return fmt::format("config_groups.{}.weights.{}", config.group, key);
}

void check_weight_shape(const QuantLinearSource& src) {
  const SafetensorsTensor& shape = require(src, "weight_shape", {DType::kI64, DType::kI32}, {2});
  for (int i = 0; i < 2; ++i) {
    int64_t dim = 0;
    if (shape.dtype == DType::kI64)
      std::memcpy(&dim, shape.data + 8 * i, 8);
    else
      dim = static_cast<int32_t>(word(shape, i));
    if (dim != (i == 0 ? src.n : src.k))
      fail(src, "weight_shape", fmt::format("says [{}] = {}, but the config gives [{}, {}]", i, dim, src.n, src.k));
  }
}

// weight_zero_point, present exactly when the group is asymmetric.
const SafetensorsTensor* zero_points(const QuantLinearSource& src, const QuantConfig& config, int64_t groups) {
  const SafetensorsTensor* found = find(src, "weight_zero_point");
  if (config.symmetric) {
    if (found != nullptr) fail(src, "weight_zero_point", fmt::format("is present, but {} is true",
                                                                     weights_field(config, "symmetric")));
    return nullptr;
  }
  if (found == nullptr)
    throw LoadError(src.file, fmt::format("missing tensor {} ({} is false)", tensor_name(src, "weight_zero_point"),
                                          weights_field(config, "symmetric")));
  if (found->dtype == DType::kI8 && found->shape == std::vector<int64_t>{src.n, groups})
    fail(src, "weight_zero_point", fmt::format("holds unpacked I8 zero points [{}, {}], as compressed-tensors before "
                                               "0.9.4 wrote them; only the packed I32 form (since 0.9.4, the one "
                                               "vLLM reads) is supported", src.n, groups));
  return &require(src, "weight_zero_point", {DType::kI32}, {(src.n * config.bits + 31) / 32, groups});
}

// weight_g_idx, present exactly with actorder "group" (QuantConfig::desc_act). compressed-tensors registers it
// filled with -1 and reads any -1 as "no ordering" (_process_group: `-1 in g_idx`), so all -1 is the natural
// order. _process_group puts column k in group (k's rank in argsort(g_idx)) / group_size, which is g_idx[k] (what
// vLLM's kernels and Weight::g_idx read) only when every group holds group_size columns: a file where the two
// differ is refused rather than read one way.
void read_g_idx(const QuantLinearSource& src, const QuantConfig& config, int64_t groups, QuantWeightBuilder& out) {
  const SafetensorsTensor* found = find(src, "weight_g_idx");
  if (!config.desc_act) {
    if (found != nullptr)
      fail(src, "weight_g_idx", fmt::format("is present, but {} is not \"group\"", weights_field(config, "actorder")));
    return;
  }
  if (found == nullptr)
    throw LoadError(src.file, fmt::format("missing tensor {} ({} is \"group\")", tensor_name(src, "weight_g_idx"),
                                          weights_field(config, "actorder")));
  const SafetensorsTensor& g_idx = require(src, "weight_g_idx", {DType::kI32}, {src.k});
  std::vector<int64_t> count(static_cast<size_t>(groups), 0);
  int64_t unset = 0;
  for (int64_t i = 0; i < src.k; ++i) {
    const auto g = static_cast<int32_t>(word(g_idx, i));
    if (g == -1) {
      ++unset;
      continue;
    }
    if (g < 0 || g >= groups)
      fail(src, "weight_g_idx", fmt::format("g_idx[{}] = {} is outside the {} groups", i, g, groups));
    ++count[static_cast<size_t>(g)];
  }
  if (unset == src.k) return;  // never set: column order
  if (unset > 0)
    fail(src, "weight_g_idx", fmt::format("holds -1 (unset) for {} of {} columns: compressed-tensors would ignore it "
                                          "and vLLM read it, so it is refused", unset, src.k));
  for (int64_t g = 0; g < groups; ++g)
    if (count[static_cast<size_t>(g)] != config.group_size)
      fail(src, "weight_g_idx", fmt::format("puts {} columns in group {}, not group_size {}",
                                            count[static_cast<size_t>(g)], g, config.group_size));
  out.set_g_idx(g_idx, tensor_name(src, "weight_g_idx"));
}

Weight convert_pack_quantized(const QuantLinearSource& src, const QuantConfig& config,
                              std::vector<HostTensor>& owned) {
  const int64_t n = src.n, k = src.k;
  const int bits = config.bits;
  if ((k * bits) % 32 != 0) fail(src, "weight_packed", fmt::format("cannot pack in_features {} at {} bits", k, bits));
  const int64_t groups = num_groups(src, config.group_size, weights_field(config, "group_size"));
  const SafetensorsTensor& packed = require(src, "weight_packed", {DType::kI32}, {n, k * bits / 32});
  const SafetensorsTensor& scales = require(src, "weight_scale", kScaleDtypes, {n, groups});
  check_weight_shape(src);
  const SafetensorsTensor* zeros = zero_points(src, config, groups);

  const bool int4 = bits == 4;
  const int64_t words_per_row = k * bits / 32;
  const int64_t per_word = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const int32_t offset = 1 << (bits - 1);  // codes and zero points are stored unsigned: q + 2^(b-1)
  // int4 keeps zero points (8 when symmetric); int8 only when asymmetric, as I32 in the signed domain.
  QuantWeightBuilder out(int4 ? QuantScheme::kInt4Group : QuantScheme::kInt8Channel, int4 ? DType::kU8 : DType::kI8,
                         n, k, config.group_size, int4 || zeros != nullptr, int4 ? DType::kU8 : DType::kI32, owned);
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t w = 0; w < words_per_row; ++w) {
      const uint32_t bits_word = word(packed, row * words_per_row + w);
      for (int64_t j = 0; j < per_word; ++j) {
        const uint32_t u = (bits_word >> (bits * j)) & mask;
        if (int4)
          out.set_int4(row, w * per_word + j, u);  // kept unsigned
        else
          out.set_int8(row, w * per_word + j, static_cast<int8_t>(static_cast<int32_t>(u) - offset));
      }
    }
    for (int64_t g = 0; g < groups; ++g) {
      out.set_scale(row, g, float_at(scales, row * groups + g));
      if (zeros == nullptr) {
        if (int4) out.set_zero(row, g, offset);
        continue;
      }
      // Row `row` of column g: bits row*b .. of the column's stream, word row / per_word of it.
      const uint32_t zero_word = word(*zeros, (row / per_word) * groups + g);
      const auto u_z = static_cast<int32_t>((zero_word >> (bits * (row % per_word))) & mask);
      out.set_zero(row, g, int4 ? u_z : u_z - offset);
    }
  }
  read_g_idx(src, config, groups, out);
  out.set_source_format(intern_source_format(fmt::format("compressed-tensors pack-quantized {}-bit {}{}{}", bits,
                                                         group_text(config.group_size), zeros ? " asym" : "",
                                                         config.desc_act ? " act-order" : "")));
  return out.finish();
}

}  // namespace

Weight convert_compressed_tensors_linear(const QuantLinearSource& src, const QuantConfig& config,
                                         std::vector<HostTensor>& owned) {
  return config.is_float ? convert_fp8_linear(src, config, owned) : convert_pack_quantized(src, config, owned);
}

}  // namespace pagoda
