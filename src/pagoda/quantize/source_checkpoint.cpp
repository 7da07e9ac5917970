// Opening and checking the checkpoint to quantize.
#include "pagoda/quantize/source_checkpoint.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "pagoda/core/error.h"
#include "pagoda/loader/hf_config.h"

namespace pagoda::quantizer {
namespace {

namespace fs = std::filesystem;

bool is_float(DType d) { return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16; }

}  // namespace

std::vector<float> tensor_values(const SafetensorsTensor& t) {
  const size_t size = t.nbytes / static_cast<size_t>(dtype_block_bytes(t.dtype));
  std::vector<float> out(size);
  for (size_t i = 0; i < size; ++i) {
    if (t.dtype == DType::kF32) {
      std::memcpy(&out[i], t.data + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      out[i] = t.dtype == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  return out;
}

SourceCheckpoint SourceCheckpoint::open(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw LoadError(path, "no such model file or directory");
  if (!fs::is_directory(path, ec)) {
    if (fs::path(path).extension() == ".gguf")
      throw LoadError(path, "GGUF input is not supported: quantize an HF safetensors directory");
    throw LoadError(path, "not a directory: give an HF safetensors checkpoint directory");
  }
  const fs::path config_path = fs::path(path) / "config.json";
  if (!fs::exists(config_path, ec)) throw LoadError(path, "no config.json in the model directory");
  if (fs::exists(fs::path(path) / "hf_quant_config.json", ec))
    throw LoadError(path, "is already quantized (hf_quant_config.json): quantize an unquantized checkpoint");
  std::ifstream in(config_path);
  nlohmann::ordered_json config_json = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config_json.is_discarded() || !config_json.is_object()) throw LoadError(config_path.string(), "is not a JSON object");
  if (config_json.contains("quantization_config") && !config_json["quantization_config"].is_null())
    throw LoadError(config_path.string(),
                    "has a quantization_config: the checkpoint is already quantized; quantize an unquantized one");
  SourceCheckpoint src{path, std::move(config_json), parse_hf_config(config_path.string()),
                       SafetensorsCheckpoint::open(path), DType::kF32};
  bool first = true;
  for (int layer = 0; layer < src.config.num_layers; ++layer)
    for (const char* linear : kLinearNames) {
      const std::string name = fmt::format("model.layers.{}.{}.weight", layer, linear);
      const SafetensorsTensor& t = src.tensor(name);
      if (!is_float(t.dtype) || t.shape.size() != 2)
        throw LoadError(t.file, fmt::format("tensor {} is {} {}-d: only unquantized F32, F16 or BF16 2-d linears "
                                            "can be quantized", name, dtype_name(t.dtype), t.shape.size()));
      if (first) src.linear_dtype = t.dtype;
      first = false;
    }
  return src;
}

const SafetensorsTensor& SourceCheckpoint::tensor(const std::string& name) const {
  const SafetensorsTensor* t = tensors.find(name);
  if (t == nullptr) throw LoadError(dir, fmt::format("missing tensor {}", name));
  return *t;
}

Matrix SourceCheckpoint::matrix(const std::string& name) const {
  const SafetensorsTensor& t = tensor(name);
  Matrix m;
  m.rows = t.shape.at(0);
  m.cols = t.shape.size() > 1 ? t.shape[1] : 1;
  m.data = tensor_values(t);
  return m;
}

std::vector<float> SourceCheckpoint::vector(const std::string& name) const { return tensor_values(tensor(name)); }

Matrix SourceCheckpoint::embeddings() const {
  const std::string name = "model.embed_tokens.weight";
  if (tensors.find(name) != nullptr) return matrix(name);
  if (const std::string* alias = tensors.metadata(name); alias != nullptr && tensors.find(*alias) != nullptr)
    return matrix(*alias);
  if (config.tie_word_embeddings && tensors.find("lm_head.weight") != nullptr) return matrix("lm_head.weight");
  throw LoadError(dir, "missing tensor model.embed_tokens.weight");
}

}  // namespace pagoda::quantizer
