// Opening and checking the checkpoint to quantize: an HF safetensors directory read here, a GGUF file by
// gguf_source.cpp; both end in the same SourceCheckpoint and the same checks of the linears.
#include "pagoda/quantize/source_checkpoint.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "pagoda/core/error.h"
#include "pagoda/loader/gguf_loader.h"
#include "pagoda/loader/hf_config.h"
#include "pagoda/loader/hf_loader.h"
#include "pagoda/quantize/gguf_source.h"

namespace pagoda::quantizer {
namespace {

namespace fs = std::filesystem;

bool is_float(DType d) { return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16; }

bool has_gguf_magic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

SourceCheckpoint open_hf_source(const std::string& path) {
  std::error_code ec;
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
  SourceCheckpoint src;
  src.path = path;
  src.format = SourceFormat::kSafetensors;
  src.files_dir = path;
  src.config_json = std::move(config_json);
  src.config = parse_hf_config(config_path.string());
  auto ckpt = std::make_shared<const SafetensorsCheckpoint>(SafetensorsCheckpoint::open(path));
  src.tensors = ckpt->tensors();
  src.metadata = ckpt->metadata_entries();
  src.storage.push_back(ckpt);  // owns the mappings the views point into
  return src;
}

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

void check_linears(SourceCheckpoint& src) {
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
}

SourceCheckpoint SourceCheckpoint::open(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw LoadError(path, "no such model file or directory");
  SourceCheckpoint src;
  if (fs::is_directory(path, ec)) {
    src = open_hf_source(path);
  } else if (fs::path(path).extension() == ".gguf" || has_gguf_magic(path)) {
    src = open_gguf_source(path);
  } else {
    throw LoadError(path, "not a model: give an HF safetensors checkpoint directory or a .gguf file");
  }
  check_linears(src);
  return src;
}

const SafetensorsTensor* SourceCheckpoint::find(const std::string& name) const {
  const auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

const SafetensorsTensor& SourceCheckpoint::tensor(const std::string& name) const {
  const SafetensorsTensor* t = find(name);
  if (t == nullptr) throw LoadError(path, fmt::format("missing tensor {}", name));
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
  if (find(name) != nullptr) return matrix(name);
  if (const auto alias = metadata.find(name); alias != metadata.end() && find(alias->second) != nullptr)
    return matrix(alias->second);
  if (config.tie_word_embeddings && find("lm_head.weight") != nullptr) return matrix("lm_head.weight");
  throw LoadError(path, "missing tensor model.embed_tokens.weight");
}

std::unique_ptr<Tokenizer> SourceCheckpoint::load_tokenizer() const {
  if (format == SourceFormat::kGguf) return load_gguf_tokenizer_if_present(GgufFile(path));
  return load_hf_tokenizer_if_present(files_dir);
}

}  // namespace pagoda::quantizer
