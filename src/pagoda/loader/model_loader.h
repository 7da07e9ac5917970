// load_model: the one entry point that turns a path (HF safetensors directory or .gguf file) into a
// ModelConfig, ModelWeights and Tokenizer, or fails with a one-line LoadError naming file and problem.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pagoda/core/buffer.h"
#include "pagoda/core/mapped_file.h"
#include "pagoda/loader/model_config.h"
#include "pagoda/loader/model_weights.h"
#include "pagoda/tokenizer/tokenizer.h"

namespace pagoda {

enum class LoadFormat {
  kAuto,   // directory with config.json + *.safetensors, or a .gguf file
  kDummy,  // config only (directory with config.json, or a .gguf's metadata); random weights, for speed runs
};

// Precision of the RoPE inverse frequencies (RopeConfig::inv_freq_dtype).
enum class RopeFreqDtype {
  kFloat32,     // computed and held in fp32: transformers' from_pretrained, vLLM, llama.cpp, Meta's reference
  kCheckpoint,  // rounded to the checkpoint dtype, as a transformers model does after `.to(bfloat16)` casts its
                // inv_freq buffer; tests/data/refs/hf_*.json were made that way
};

struct LoadOptions {
  std::string model_path;
  LoadFormat format = LoadFormat::kAuto;
  uint64_t dummy_seed = 0;
  bool show_progress = true;  // progress bar on stderr for large checkpoints
  RopeFreqDtype rope_freq_dtype = RopeFreqDtype::kFloat32;
  // Quantized HF checkpoints: "" detects the format from config.json's quantization_config; "awq", "gptq",
  // "compressed-tensors", "modelopt", "fp8" or "none" must match it (a mismatch is a LoadError). With kDummy:
  // the form of the random linears ("int8" too; loader/dummy_quant_weights.h), "" or "none" for the dtype's.
  std::string quantization{};
  // An HF directory whose tokenizer.json (and tokenizer_config.json) replaces the checkpoint's own (vLLM's
  // --tokenizer): quantized checkpoints often ship without tokenizer files. Empty: the checkpoint's.
  std::string tokenizer_path{};
  // W8A8 checkpoints (FP8 weights whose quantization_config quantizes the inputs too): true computes as the
  // checkpoint says (Weight::activations); false keeps the inputs unquantized (weight-only, W8A16), for
  // comparing against a reference of the dequantized weights.
  bool quantize_activations = true;
};

struct LoadedModel {
  std::string source;  // the path given
  std::string format;  // "safetensors", "gguf", "dummy"
  ModelConfig config;
  GenerationDefaults generation;
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;  // null only for a dummy load without tokenizer files
  // Storage the weight views point into.
  std::vector<std::shared_ptr<const MappedFile>> mappings;
  std::vector<HostTensor> owned;
};

LoadedModel load_model(const LoadOptions& options);

}  // namespace pagoda
