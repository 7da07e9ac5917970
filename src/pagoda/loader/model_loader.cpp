// load_model: picks the reader for a path (HF directory, .gguf file, or dummy weights from either's config)
// and logs what was loaded.
#include "pagoda/loader/model_loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "pagoda/core/error.h"
#include "pagoda/core/logging.h"
#include "pagoda/loader/dummy_weights.h"
#include "pagoda/loader/gguf_file.h"
#include "pagoda/loader/gguf_loader.h"
#include "pagoda/loader/hf_config.h"
#include "pagoda/loader/hf_loader.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

bool has_gguf_magic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

enum class Source { kHfDirectory, kGguf };

Source classify(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw LoadError(path, "no such file or directory");
  if (fs::is_directory(path, ec)) return Source::kHfDirectory;
  if (fs::path(path).extension() == ".gguf" || has_gguf_magic(path)) return Source::kGguf;
  if (fs::path(path).extension() == ".safetensors")
    throw LoadError(path, "pass the checkpoint directory (with config.json), not a .safetensors file");
  throw LoadError(path, "not a model: expected an HF checkpoint directory or a .gguf file");
}

LoadedModel load_dummy(const LoadOptions& options) {
  const std::string& path = options.model_path;
  LoadedModel model;
  model.source = path;
  model.format = "dummy";
  std::string config_path;  // where a quantized dummy's group size may come from; none for a GGUF
  if (classify(path) == Source::kHfDirectory) {
    const fs::path dir(path);
    std::error_code ec;
    if (!fs::exists(dir / "config.json", ec)) throw LoadError(path, "no config.json in the model directory");
    config_path = (dir / "config.json").string();
    model.config = parse_hf_config(config_path);
    model.generation = parse_generation_config((dir / "generation_config.json").string());
    model.tokenizer = load_hf_tokenizer_if_present(path);
  } else {
    const GgufFile file(path);
    model.config = gguf_model_config(file);
    model.tokenizer = load_gguf_tokenizer_if_present(file);
    model.generation.eos_token_ids = model.config.eos_token_ids;
  }
  const DummyQuant quant = dummy_quant_kind(options.quantization, path, config_path);
  make_dummy_weights(model, quant, options.dummy_seed, options.show_progress);
  return model;
}

// Linears that read the same input with static FP8 scales (q, k, v; gate, up) quantize it once, with the
// largest of their input_scales, as vLLM's fused QKV and gate-up layers do: so every backend, fused or not,
// computes the same thing.
void share_static_input_scales(ModelWeights& weights) {
  auto share = [](std::initializer_list<Weight*> parts) {
    float s = 0.0f;
    for (const Weight* w : parts) {
      if (w->activations != ActivationQuant::kFp8Static) return;
      s = std::max(s, w->input_scale);
    }
    for (Weight* w : parts) w->input_scale = s;
  };
  for (LayerWeights& l : weights.layers) {
    share({&l.wq, &l.wk, &l.wv});
    share({&l.w_gate, &l.w_up});
  }
}

// The tokenizer of another HF directory (its tokenizer.json) or GGUF file (its tokenizer.ggml.* metadata: a
// checkpoint that `pagoda quantize` wrote from a GGUF source has none of its own); the BOS/EOS ids fall back to it
// as they do to a checkpoint's own.
void use_tokenizer_from(const std::string& path, LoadedModel& model) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    model.tokenizer = load_hf_tokenizer_if_present(path);
    if (!model.tokenizer) throw LoadError(path, "--tokenizer: no tokenizer.json in the directory");
  } else if (fs::is_regular_file(path, ec)) {
    model.tokenizer = load_gguf_tokenizer_if_present(GgufFile(path));
    if (!model.tokenizer) throw LoadError(path, "--tokenizer: the GGUF file has no tokenizer (tokenizer.ggml.*)");
  } else {
    throw LoadError(path, "--tokenizer: neither a directory nor a GGUF file");
  }
  if (!model.config.bos_token_id) model.config.bos_token_id = model.tokenizer->bos_token_id();
  if (model.config.eos_token_ids.empty()) model.config.eos_token_ids = model.tokenizer->eos_token_ids();
}

}  // namespace

LoadedModel load_model(const LoadOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  LoadedModel model;
  // int8 names a dummy form only: real int8 checkpoints come in a format of their own, which says how to read it.
  if (options.quantization == "int8" && options.format != LoadFormat::kDummy)
    throw LoadError(options.model_path, "--quantization int8 is for --load-format dummy only (random int8 weights); "
                                        "an int8 checkpoint is loaded by its own format: compressed-tensors (W8A16) "
                                        "or gptq (8-bit), detected from config.json when --quantization is left out");
  if (options.format == LoadFormat::kDummy) {
    model = load_dummy(options);
  } else if (classify(options.model_path) == Source::kHfDirectory) {
    model = load_hf_model(options.model_path, options);
  } else {
    if (!options.quantization.empty() && options.quantization != "none")
      throw LoadError(options.model_path, fmt::format("--quantization {} applies to HF checkpoints; a GGUF file's "
                                                      "tensor types say how it is quantized", options.quantization));
    model = load_gguf_model(options.model_path, options);
  }
  if (options.rope_freq_dtype == RopeFreqDtype::kCheckpoint) model.config.rope.inv_freq_dtype = model.config.dtype;
  ActivationQuant activations = ActivationQuant::kNone;  // the first W8A8 linear's, for the log
  for (Weight* w : model.weights.all()) {
    if (!options.quantize_activations) w->activations = ActivationQuant::kNone;
    if (activations == ActivationQuant::kNone && is_fp8_activations(w->activations)) activations = w->activations;
  }
  share_static_input_scales(model.weights);
  if (!options.tokenizer_path.empty()) use_tokenizer_from(options.tokenizer_path, model);
  const ModelConfig& c = model.config;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const Weight& embed = model.weights.embed_tokens;  // its format: the file's block type, scheme or dtype
  const std::string_view embed_format = !embed.source_format.empty() ? embed.source_format
                                        : embed.quantized()          ? quant_scheme_name(embed.scheme)
                                                                     : dtype_name(embed.data.dtype);
  spdlog::info("loaded {} ({}): {} layers, hidden {}, {} heads / {} kv heads, vocab {}, {:.1f}M parameters, {} in "
               "{:.2f} s{}{}",
               model.source, model.format, c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.vocab_size,
               static_cast<double>(c.num_parameters()) / 1e6, embed_format, secs,
               model.tokenizer ? "" : " (no tokenizer)",
               activations == ActivationQuant::kNone ? ""
                                                     : fmt::format(", W8A8 ({} activations)", activation_quant_name(activations)));
  return model;
}

}  // namespace pagoda
