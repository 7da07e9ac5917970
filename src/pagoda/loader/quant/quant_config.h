// QuantConfig: config.json's `quantization_config` (AutoAWQ, AutoGPTQ, compressed-tensors, ModelOpt, fp8) or
// ModelOpt's hf_quant_config.json, reduced to what the converters need, checked against
// LoadOptions::quantization.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pagoda {

enum class QuantMethod { kNone, kAwq, kGptq, kCompressedTensors, kModelOpt, kFp8 };

struct QuantConfig {
  QuantMethod method = QuantMethod::kNone;
  std::string name;        // quant_method as vLLM names it ("awq", "gptq", "compressed-tensors", "modelopt", "fp8")
  int bits = 0;            // 4 or 8 (compressed-tensors FP8: 8 with is_float)
  int64_t group_size = 0;  // along K; 0 = one group per output row (channel)
  bool symmetric = true;
  bool is_float = false;   // FP8 e4m3 weights (compressed-tensors float-quantized, modelopt, fp8)
  int64_t fp8_block_n = 0;  // fp8 weight_block_size [bn, bk]: one weight_scale_inv per block; 0 = none
  int64_t fp8_block_k = 0;
  bool desc_act = false;   // GPTQ act-order: g_idx must be present
  bool gptq_v2 = false;    // checkpoint_format "gptq_v2": qzeros hold z itself, not z - 1
  // Modules left unquantized: AutoAWQ's modules_to_not_convert (substrings of the module name),
  // compressed-tensors' ignore (exact names, or "re:" regular expressions), ModelOpt's exclude_modules (exact
  // names, substrings or shell wildcards, as vLLM matches them) or fp8's modules_to_not_convert.
  std::vector<std::string> not_converted{};

  // Whether the linear `module` ("model.layers.0.self_attn.q_proj") is stored quantized.
  bool quantizes(const std::string& module) const;
};

// Reads the quantization_config of `config_path` (config.json), or, when it has none, ModelOpt's
// hf_quant_config.json beside it. `requested` is LoadOptions::quantization: "" (detect), "none", "awq",
// "gptq", "compressed-tensors", "modelopt" or "fp8" (any checkpoint with FP8 weights);
// a request that does not match the checkpoint, and any field the converters cannot honour, is a
// LoadError naming config.json and the field.
QuantConfig parse_quant_config(const std::string& config_path, const std::string& requested);

}  // namespace pagoda
