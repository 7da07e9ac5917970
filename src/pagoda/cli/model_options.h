// Options every model-using subcommand shares (--model, --load-format, --threads, --quantization, --tokenizer), and
// where the bundled default model is found.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "pagoda/loader/model_loader.h"

namespace pagoda::cli {

struct ModelOptions {
  std::string model;  // empty: the bundled stories260K
  std::string load_format = "auto";
  int threads = 0;
  std::string rope_freq_dtype = "float32";
  std::string quantization;  // empty: detected from config.json
  std::string tokenizer;     // empty: the checkpoint's own tokenizer files
  std::string activation_quantization = "auto";  // auto: as the checkpoint says; none: weight-only
  std::string quantize_lm_head = "none";          // none | fp8 | int8 | w4 (EngineCliOptions::llm_options)
  std::string quantize_embeddings = "none";       // the same, for the embedding table

  void add_to(CLI::App& cmd);
  LoadOptions load_options() const;  // resolves the default model; throws Error when it is missing
};

// --quantization, checked against the kinds known (ModelOptions::add_to; `pagoda inspect`, whose other options
// differ, adds it alone).
void add_quantization_option(CLI::App& cmd, std::string& quantization);

// A file shipped with Pagoda (`relative` to the source tree): next to the binary's build tree, in the source
// tree, or in the working directory; "" when none has it.
std::string find_bundled_file(const std::string& relative);
// models/stories260K.gguf, found as find_bundled_file does; an Error when it is missing.
std::string default_model_path();
// data/calibration/tinystories_calibration.txt, the default AWQ calibration text; an Error when it is missing.
std::string default_calibration_path();

}  // namespace pagoda::cli
