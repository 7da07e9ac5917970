// compressed-tensors packing (compressors/pack_quantized, naive float) and the config its
// ModelCompressor.update_config writes, with the key order of the reference files.
#include "pagoda/quantize/compressed_tensors_writer.h"

namespace pagoda::quantizer {
namespace {

using ojson = nlohmann::ordered_json;

ojson quant_args(int bits, const char* type, const char* strategy, ojson group_size, bool dynamic, ojson observer) {
  return {{"actorder", nullptr}, {"block_structure", nullptr}, {"dynamic", dynamic},   {"group_size", group_size},
          {"num_bits", bits},    {"observer", observer},       {"observer_kwargs", ojson::object()},
          {"scale_dtype", nullptr}, {"strategy", strategy},    {"symmetric", true},   {"type", type},
          {"zp_dtype", nullptr}};
}

ojson config(const char* format, ojson weights, ojson input_activations) {
  ojson group = {{"format", format},
                 {"input_activations", input_activations},
                 {"output_activations", nullptr},
                 {"targets", ojson::array({"Linear"})},
                 {"weights", weights}};
  return {{"config_groups", {{"group_0", group}}},
          {"format", format},
          {"global_compression_ratio", nullptr},
          {"ignore", ojson::array({"lm_head"})},
          {"kv_cache_scheme", nullptr},
          {"quant_method", "compressed-tensors"},
          {"quantization_status", "compressed"},
          {"sparsity_config", ojson::object()},
          {"transform_config", ojson::object()},
          {"version", "0.18.0"}};
}

}  // namespace

SafetensorsEntry float_entry(std::string name, DType dtype, std::vector<int64_t> shape, const std::vector<float>& v) {
  if (dtype == DType::kF32) return make_entry(std::move(name), dtype, std::move(shape), v);
  std::vector<uint16_t> half(v.size());
  for (size_t i = 0; i < v.size(); ++i) half[i] = dtype == DType::kF16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
  return make_entry(std::move(name), dtype, std::move(shape), half);
}

std::vector<SafetensorsEntry> pack_quantized_tensors(const std::string& module, const SymCodes& q, DType scale_dtype) {
  const int64_t per_word = 32 / q.bits, words_per_row = q.k / per_word;
  const uint32_t mask = (1u << q.bits) - 1, offset = 1u << (q.bits - 1);
  std::vector<uint32_t> packed(static_cast<size_t>(q.n * words_per_row), 0u);  // [N, K*b/32]
  for (int64_t r = 0; r < q.n; ++r)
    for (int64_t c = 0; c < q.k; ++c) {
      const uint32_t u = (static_cast<uint32_t>(static_cast<int32_t>(q.codes[r * q.k + c]) + static_cast<int32_t>(offset))) & mask;
      packed[r * words_per_row + c / per_word] |= u << (q.bits * (c % per_word));
    }
  std::vector<SafetensorsEntry> out;
  out.push_back(make_entry(module + ".weight_packed", DType::kI32, {q.n, words_per_row}, packed));
  out.push_back(float_entry(module + ".weight_scale", scale_dtype, {q.n, q.k / q.group_size}, q.scales));
  out.push_back(make_entry(module + ".weight_shape", DType::kI64, {2}, std::vector<int64_t>{q.n, q.k}));
  return out;
}

std::vector<SafetensorsEntry> float_quantized_tensors(const std::string& module, const Fp8Codes& q, DType scale_dtype) {
  std::vector<SafetensorsEntry> out;
  out.push_back(make_entry(module + ".weight", DType::kF8E4M3, {q.n, q.k}, q.codes));
  out.push_back(float_entry(module + ".weight_scale", scale_dtype, {q.n, 1}, q.scales));
  return out;
}

ojson pack_quantized_config(int bits, int64_t group_size) {
  return config("pack-quantized",
                quant_args(bits, "int", group_size == 0 ? "channel" : "group",
                           group_size == 0 ? ojson(nullptr) : ojson(group_size), false, "memoryless_minmax"),
                nullptr);
}

ojson fp8_dynamic_config() {
  return config("float-quantized", quant_args(8, "float", "channel", nullptr, false, "memoryless_minmax"),
                quant_args(8, "float", "token", nullptr, true, nullptr));
}

}  // namespace pagoda::quantizer
