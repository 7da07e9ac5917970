// Loading an HF checkpoint directory (config.json, generation_config.json, *.safetensors, tokenizer.json).
#pragma once

#include <memory>
#include <string>

#include "pagoda/loader/model_loader.h"

namespace pagoda {

LoadedModel load_hf_model(const std::string& dir, const LoadOptions& options);

// dir/tokenizer.json (with dir/tokenizer_config.json when present), or null when there is no tokenizer.json.
std::unique_ptr<Tokenizer> load_hf_tokenizer_if_present(const std::string& dir);

}  // namespace pagoda
