// QuantConfig: config.json's `quantization_config` (AutoAWQ, AutoGPTQ, compressed-tensors), reduced to what
// the converters need, checked against LoadOptions::quantization.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pagoda {

enum class QuantMethod { kNone, kAwq, kGptq, kCompressedTensors };

struct QuantConfig {
  QuantMethod method = QuantMethod::kNone;
  std::string name;        // quant_method as written ("awq", "gptq", "compressed-tensors"); "" when none
  int bits = 0;            // 4 or 8 (compressed-tensors FP8: 8 with is_float)
  int64_t group_size = 0;  // along K; 0 = one group per output row (channel)
  bool symmetric = true;
  bool is_float = false;   // compressed-tensors "float-quantized" (FP8 e4m3)
  bool desc_act = false;   // GPTQ act-order: g_idx must be present
  bool gptq_v2 = false;    // checkpoint_format "gptq_v2": qzeros hold z itself, not z - 1
  // Modules left unquantized: AutoAWQ's modules_to_not_convert (substrings of the module name), or
  // compressed-tensors' ignore (exact names, or "re:" regular expressions).
  std::vector<std::string> not_converted{};

  // Whether the linear `module` ("model.layers.0.self_attn.q_proj") is stored quantized.
  bool quantizes(const std::string& module) const;
};

// Reads the quantization_config of `config_path` (config.json). `requested` is LoadOptions::quantization:
// "" (detect), "none", "awq", "gptq", "compressed-tensors" or "fp8" (compressed-tensors float-quantized);
// a request that does not match the checkpoint, and any field the converters cannot honour, is a
// LoadError naming config.json and the field.
QuantConfig parse_quant_config(const std::string& config_path, const std::string& requested);

}  // namespace pagoda
