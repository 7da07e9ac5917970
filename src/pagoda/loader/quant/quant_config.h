// QuantConfig: config.json's `quantization_config` (AutoAWQ, AutoGPTQ, compressed-tensors, ModelOpt, fp8) or
// ModelOpt's hf_quant_config.json, reduced to what the converters need, checked against
// LoadOptions::quantization. Every format but compressed-tensors has one scheme for all its quantized linears;
// compressed-tensors has one per config group, and scheme_for() says which a module gets.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pagoda/core/quant_scheme.h"

namespace pagoda {

enum class QuantMethod { kNone, kAwq, kGptq, kCompressedTensors, kModelOpt, kFp8 };

struct QuantConfig;

// One compressed-tensors config group: the module names, "re:" regular expressions and class names it targets,
// and the scheme of the modules it wins (loader/quant/compressed_tensors_config.cpp says how). The scheme is
// held by pointer: QuantConfig holds its groups, and a vector's element type must be complete where the
// vector is (clang insists).
struct QuantGroup {
  std::vector<std::string> targets;
  std::shared_ptr<const QuantConfig> scheme;
};

// The scheme fields (bits ... gptq_v2) are those of every quantized linear, or, for compressed-tensors, those
// of the first config group (`groups` holds each group's own).
struct QuantConfig {
  QuantMethod method = QuantMethod::kNone;
  std::string name;        // quant_method as vLLM names it ("awq", "gptq", "compressed-tensors", "modelopt", "fp8")
  int bits = 0;            // 4 or 8 (compressed-tensors FP8: 8 with is_float)
  int64_t group_size = 0;  // along K; 0 = one group per output row (channel)
  bool symmetric = true;
  bool is_float = false;   // FP8 e4m3 weights (compressed-tensors float-quantized, modelopt, fp8)
  int64_t fp8_block_n = 0;  // fp8 weight_block_size [bn, bk]: one weight_scale_inv per block; 0 = none
  int64_t fp8_block_k = 0;
  bool desc_act = false;   // act order, g_idx must be present: GPTQ desc_act, compressed-tensors actorder "group"
  bool gptq_v2 = false;    // checkpoint_format "gptq_v2": qzeros hold z itself, not z - 1
  // FP8 weights: how the checkpoint quantizes their inputs (W8A8: compressed-tensors' input_activations,
  // fp8's activation_scheme, ModelOpt's quant_algo); kNone for weight-only schemes.
  ActivationQuant activations = ActivationQuant::kNone;
  // Modules left unquantized: AutoAWQ's modules_to_not_convert (substrings of the module name),
  // compressed-tensors' ignore (exact names, "re:" regular expressions or class names, matched as the groups'
  // targets are: compressed_tensors_config.cpp), ModelOpt's exclude_modules (exact
  // names, substrings or shell wildcards, as vLLM matches them) or fp8's modules_to_not_convert.
  std::vector<std::string> not_converted{};
  // compressed-tensors: the config groups in the file's order, each with its targets and its scheme (a
  // QuantConfig of method kCompressedTensors whose `group` names it); empty for the other methods.
  std::vector<QuantGroup> groups{};
  std::string group{};     // compressed-tensors: the config group this scheme is ("group_0"), for messages

  // The scheme the linear `module` ("model.layers.0.self_attn.q_proj") is stored in: this config, or its
  // compressed-tensors group, or nullptr when the module is stored unquantized (not targeted, or ignored).
  // The pointer lives as long as this config.
  const QuantConfig* scheme_for(const std::string& module) const;
  bool quantizes(const std::string& module) const { return scheme_for(module) != nullptr; }
};

// Reads the quantization_config of `config_path` (config.json), or, when it has none, ModelOpt's
// hf_quant_config.json beside it. `requested` is LoadOptions::quantization: "" (detect), "none", "awq",
// "gptq", "compressed-tensors", "modelopt" or "fp8" (any checkpoint with FP8 weights);
// a request that does not match the checkpoint, and any field the converters cannot honour, is a
// LoadError naming config.json and the field.
QuantConfig parse_quant_config(const std::string& config_path, const std::string& requested);

}  // namespace pagoda
