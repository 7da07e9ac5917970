// Converters from the quantized checkpoint formats to the internal forms of core/quant_scheme.h, one file
// per format (awq.cpp, gptq.cpp, compressed_tensors.cpp, fp8.cpp). Each runs once at load and writes owned host
// tensors; any tensor whose dtype, shape or contents contradict config.json is a LoadError naming it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pagoda/core/buffer.h"
#include "pagoda/loader/model_weights.h"
#include "pagoda/loader/quant/quant_config.h"
#include "pagoda/loader/safetensors.h"

namespace pagoda {

// One quantized linear of the checkpoint: nn.Linear(in_features = k, out_features = n).
struct QuantLinearSource {
  const SafetensorsCheckpoint& ckpt;
  std::string file;    // what errors name (model.safetensors or the index)
  std::string module;  // "model.layers.0.self_attn.q_proj"
  int64_t n = 0;
  int64_t k = 0;
};

// The Weight for `src` in its internal form; its storage is appended to `owned` (or is the mapping, for
// FP8 codes, which are stored as they are used).
Weight convert_awq_linear(const QuantLinearSource& src, const QuantConfig& config, std::vector<HostTensor>& owned);
Weight convert_gptq_linear(const QuantLinearSource& src, const QuantConfig& config, std::vector<HostTensor>& owned);
Weight convert_compressed_tensors_linear(const QuantLinearSource& src, const QuantConfig& config,
                                         std::vector<HostTensor>& owned);
// FP8 e4m3 weights with per-tensor, per-row or per-block scales (compressed-tensors float-quantized, ModelOpt
// FP8, fp8): fp8.cpp.
Weight convert_fp8_linear(const QuantLinearSource& src, const QuantConfig& config, std::vector<HostTensor>& owned);
// Dispatches on config.method.
Weight convert_quantized_linear(const QuantLinearSource& src, const QuantConfig& config,
                                std::vector<HostTensor>& owned);

}  // namespace pagoda
