// SourceCheckpoint: the unquantized HF checkpoint `pagoda quantize` reads: config.json (kept verbatim, in
// order), the parsed ModelConfig and the safetensors tensors, with every decoder linear checked to exist in
// a float dtype; weights come out as fp32 matrices.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "pagoda/loader/model_config.h"
#include "pagoda/loader/safetensors.h"
#include "pagoda/quantize/matrix.h"

namespace pagoda::quantizer {

// The seven linears of a Llama layer, HF names under model.layers.<i>.
inline constexpr const char* kLinearNames[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                               "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                               "mlp.down_proj"};

struct SourceCheckpoint {
  std::string dir;
  nlohmann::ordered_json config_json;
  ModelConfig config;
  SafetensorsCheckpoint tensors;
  DType linear_dtype = DType::kF32;  // the dtype of the linears (the "model dtype" of scales)

  // A LoadError for a missing path, a GGUF file, a directory without config.json or safetensors, an already
  // quantized checkpoint, or a linear that is missing or not F32/F16/BF16.
  static SourceCheckpoint open(const std::string& path);

  const SafetensorsTensor& tensor(const std::string& name) const;  // LoadError when missing
  Matrix matrix(const std::string& name) const;                    // [rows, cols] in fp32
  std::vector<float> vector(const std::string& name) const;
  // The input embedding (tied checkpoints may store only lm_head.weight), [vocab, hidden] in fp32.
  Matrix embeddings() const;
};

// fp32 values of an F32, F16 or BF16 tensor.
std::vector<float> tensor_values(const SafetensorsTensor& t);

}  // namespace pagoda::quantizer
