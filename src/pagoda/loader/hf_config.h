// Reading HF config.json (transformers 4 and 5 forms) and generation_config.json.
#pragma once

#include <string>

#include "pagoda/loader/model_config.h"

namespace pagoda {

// Throws LoadError naming the file for bad JSON, missing fields, unsupported architecture or rope type.
ModelConfig parse_hf_config(const std::string& config_json_path);
// Missing file -> all defaults unset. Bad JSON -> LoadError.
GenerationDefaults parse_generation_config(const std::string& generation_config_json_path);

}  // namespace pagoda
