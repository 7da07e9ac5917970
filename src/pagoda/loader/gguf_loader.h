// Loading a llama-architecture GGUF file: ModelConfig from llama.* metadata, weights (Q/K rows put back in
// HF rotate-half order, block-quantized tensors converted to the internal quantized kinds) and the embedded
// tokenizer.
#pragma once

#include <memory>
#include <string>

#include "pagoda/loader/gguf_file.h"
#include "pagoda/loader/model_loader.h"

namespace pagoda {

// Throws LoadError naming the file: unsupported architecture or rope scaling, missing metadata.
ModelConfig gguf_model_config(const GgufFile& file);

LoadedModel load_gguf_model(const std::string& path, const LoadOptions& options);

// The tokenizer in tokenizer.ggml.*, or null when the file has none.
std::unique_ptr<Tokenizer> load_gguf_tokenizer_if_present(const GgufFile& file);

}  // namespace pagoda
