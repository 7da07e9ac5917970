// FP8 (e4m3) weights -> kFp8Channel, for every checkpoint family that stores them:
//   compressed-tensors float-quantized  weight_scale     [N, 1] (channel) or [1] (tensor)
//   ModelOpt FP8                        weight_scale     [] or [1] (per tensor; FP8_PER_CHANNEL_PER_TOKEN: [N] or [N, 1])
//   fp8 (transformers / vLLM Fp8Config) weight_scale     [] or [1] (per tensor), or, with weight_block_size [bn, bk],
//                                       weight_scale_inv [ceil(N/bn), ceil(K/bk)] (one scale per bn x bk block)
//   compressed-tensors strategy block   weight_scale     [ceil(N/bn), ceil(K/bk)] (block_structure [bn, bk])
// weight F8_E4M3 [N, K]; value = fp8(q) * s in every case (ModelOpt's and vLLM's dequantisation multiply by the
// stored scale; "scale_inv" is the name DeepSeek gave it, not a reciprocal). A static activation scheme reads
// the linear's input_scale ([] or [1]) into Weight::input_scale.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "pagoda/core/error.h"
#include "pagoda/loader/quant/quant_tensors.h"

namespace pagoda {
namespace {

using namespace quant;

const std::initializer_list<DType> kScaleDtypes = {DType::kF32, DType::kF16, DType::kBF16};

int64_t numel(const SafetensorsTensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

bool is_shape(const SafetensorsTensor& t, std::initializer_list<int64_t> shape) {
  return std::equal(t.shape.begin(), t.shape.end(), shape.begin(), shape.end());
}

// The checkpoint family's name for its FP8 weights, and how their scales are laid out ("per-channel").
std::string_view source_format(const QuantConfig& config, std::string_view scales) {
  const char* family = config.method == QuantMethod::kCompressedTensors ? "compressed-tensors float-quantized fp8"
                       : config.method == QuantMethod::kModelOpt        ? "modelopt fp8"
                                                                        : "fp8";
  return intern_source_format(fmt::format("{} {}", family, scales));
}

// A static activation scheme's input_scale ([] or [1], positive and finite) into w.input_scale.
void read_input_scale(const QuantLinearSource& src, Weight& w) {
  if (w.activations != ActivationQuant::kFp8Static) return;
  const SafetensorsTensor* input = find(src, "input_scale");
  if (input == nullptr)
    throw LoadError(src.file, fmt::format("missing tensor {} (the static activation scheme needs it)",
                                          tensor_name(src, "input_scale")));
  if (numel(*input) != 1)
    fail(src, "input_scale", fmt::format("has shape [{}]; expected [] or [1]", fmt::join(input->shape, ", ")));
  w.input_scale = float_at(*input, 0);
  if (!(w.input_scale > 0.0f) || !std::isfinite(w.input_scale))
    fail(src, "input_scale", fmt::format("is {}; a static activation scale must be positive and finite", w.input_scale));
}

}  // namespace

Weight convert_fp8_linear(const QuantLinearSource& src, const QuantConfig& config, std::vector<HostTensor>& owned) {
  const int64_t n = src.n, k = src.k;
  const SafetensorsTensor& codes = require(src, "weight", {DType::kF8E4M3}, {n, k});
  Weight w;
  w.scheme = QuantScheme::kFp8Channel;
  w.in_features = k;
  w.activations = config.activations;
  // The codes are used as stored: a zero-copy view into the mapping, like unquantized weights.
  w.data = Tensor::from_span(const_cast<std::byte*>(codes.data), DType::kF8E4M3, codes.shape);  // [N, K]

  if (config.fp8_block_n > 0) {  // one scale per [bn, bk] block, expanded to one per row and K group
    const int64_t bn = config.fp8_block_n, bk = config.fp8_block_k;
    const int64_t row_blocks = (n + bn - 1) / bn, groups = (k + bk - 1) / bk;
    const char* name = config.method == QuantMethod::kCompressedTensors ? "weight_scale" : "weight_scale_inv";
    const SafetensorsTensor& scale = require(src, name, kScaleDtypes, {row_blocks, groups});
    w.group_size = bk;
    w.scales = owned.emplace_back(DType::kF32, std::initializer_list<int64_t>{n, groups}).view();  // [N, groups]
    for (int64_t row = 0; row < n; ++row)
      for (int64_t g = 0; g < groups; ++g) w.scales.ptr<float>()[row * groups + g] = float_at(scale, (row / bn) * groups + g);
    w.source_format = source_format(config, fmt::format("block {}x{}", bn, bk));
    read_input_scale(src, w);
    return w;
  }
  const SafetensorsTensor* found = find(src, "weight_scale");
  if (found == nullptr) throw LoadError(src.file, fmt::format("missing tensor {}", tensor_name(src, "weight_scale")));
  const bool per_tensor = numel(*found) == 1 && (found->shape.empty() || is_shape(*found, {1}) || n == 1);
  const bool per_row = is_shape(*found, {n, 1}) || is_shape(*found, {n});
  if (!per_tensor && !per_row)
    fail(src, "weight_scale", fmt::format("has shape [{}]; expected [] or [1] (per tensor), or [{}] or [{}, 1] (per row)",
                                          fmt::join(found->shape, ", "), n, n));
  bool dtype_ok = false;
  for (DType d : kScaleDtypes) dtype_ok = dtype_ok || found->dtype == d;
  if (!dtype_ok) fail(src, "weight_scale", fmt::format("has dtype {}, expected F32, F16 or BF16", dtype_name(found->dtype)));
  w.group_size = k;
  w.scales = owned.emplace_back(DType::kF32, std::initializer_list<int64_t>{n, 1}).view();  // [N, 1]
  for (int64_t row = 0; row < n; ++row) w.scales.ptr<float>()[row] = float_at(*found, per_tensor ? 0 : row);
  w.source_format = source_format(config, per_tensor ? "per-tensor" : "per-channel");
  read_input_scale(src, w);
  return w;
}

}  // namespace pagoda
