// Reading only a checkpoint's configuration.
#include "pagoda/plan/model_source.h"

#include <filesystem>

#include "pagoda/core/error.h"
#include "pagoda/loader/gguf_file.h"
#include "pagoda/loader/gguf_loader.h"
#include "pagoda/loader/hf_config.h"

namespace pagoda::plan {

ModelConfig read_model_config(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw LoadError(path, "no such file or directory");
  if (fs::is_directory(path, ec)) {
    const fs::path config = fs::path(path) / "config.json";
    if (!fs::exists(config, ec)) throw LoadError(path, "no config.json in the model directory");
    return parse_hf_config(config.string());
  }
  return gguf_model_config(GgufFile(path));  // the header and metadata; tensor data is mapped, never read
}

}  // namespace pagoda::plan
