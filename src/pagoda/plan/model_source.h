// The ModelConfig of a checkpoint without its weights: config.json of an HF directory, or a GGUF file's
// metadata (as `--load-format dummy` reads them). `pagoda plan` needs nothing else.
#pragma once

#include <string>

#include "pagoda/loader/model_config.h"

namespace pagoda::plan {

// Throws LoadError naming the path: no such file, no config.json, not a model, bad metadata.
ModelConfig read_model_config(const std::string& path);

}  // namespace pagoda::plan
