// SourceCheckpoint: the unquantized checkpoint `pagoda quantize` reads, seen as an HF checkpoint whatever
// it is stored as: config.json (an HF directory's kept verbatim, in order; a GGUF file's derived from its
// metadata, gguf_source.h), the parsed ModelConfig and the tensors by HF name in HF orientation, with every
// decoder linear checked to exist in a float dtype; weights come out as fp32 matrices.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pagoda/loader/model_config.h"
#include "pagoda/loader/safetensors.h"
#include "pagoda/quantize/matrix.h"
#include "pagoda/tokenizer/tokenizer.h"

namespace pagoda::quantizer {

// The seven linears of a Llama layer, HF names under model.layers.<i>.
inline constexpr const char* kLinearNames[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                               "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                               "mlp.down_proj"};

enum class SourceFormat { kSafetensors, kGguf };

struct SourceCheckpoint {
  std::string path;  // as given: the HF directory or the .gguf file
  SourceFormat format = SourceFormat::kSafetensors;
  // The directory whose other files (tokenizer, generation config) go into the output; empty for a GGUF.
  std::string files_dir;
  nlohmann::ordered_json config_json;
  ModelConfig config;
  // Every tensor the output keeps or replaces, by HF name; the views point into `storage`.
  std::map<std::string, SafetensorsTensor> tensors;
  // The safetensors __metadata__ string entries to write again (torch's tied-weight aliases).
  std::map<std::string, std::string> metadata;
  DType linear_dtype = DType::kF32;  // the dtype of the linears (the "model dtype" of scales)
  // What the tensor views point into: the mappings, and for a GGUF the un-permuted Q/K copies.
  std::vector<std::shared_ptr<const void>> storage;

  // A LoadError for a missing path, a file that is neither a directory nor a GGUF file, a directory without
  // config.json or safetensors, an already quantized checkpoint, a GGUF tensor that is block-quantized, or a
  // linear that is missing or not F32/F16/BF16.
  static SourceCheckpoint open(const std::string& path);

  const SafetensorsTensor* find(const std::string& name) const;
  const SafetensorsTensor& tensor(const std::string& name) const;  // LoadError when missing
  Matrix matrix(const std::string& name) const;                    // [rows, cols] in fp32
  std::vector<float> vector(const std::string& name) const;
  // The input embedding (tied checkpoints may store only lm_head.weight), [vocab, hidden] in fp32.
  Matrix embeddings() const;
  // The checkpoint's own tokenizer (an HF directory's tokenizer.json, a GGUF's tokenizer.ggml.*), or null.
  std::unique_ptr<Tokenizer> load_tokenizer() const;
};

// fp32 values of an F32, F16 or BF16 tensor.
std::vector<float> tensor_values(const SafetensorsTensor& t);

// Checks that every decoder linear of `src.config` is present as a 2-d F32/F16/BF16 tensor and sets
// src.linear_dtype from the first; a LoadError naming the first that is not.
void check_linears(SourceCheckpoint& src);

}  // namespace pagoda::quantizer
