// Shared model options and the bundled model lookup.
#include "pagoda/cli/model_options.h"

#include <unistd.h>

#include <array>
#include <filesystem>

#include "pagoda/core/error.h"

namespace pagoda::cli {
namespace fs = std::filesystem;

void add_quantization_option(CLI::App& cmd, std::string& quantization) {
  cmd.add_option("--quantization", quantization,
                 "awq | gptq | compressed-tensors | modelopt | fp8 | none: the quantized format the checkpoint "
                 "must have, as vLLM names them; fp8 accepts any checkpoint with FP8 weights (default: detected "
                 "from config.json's quantization_config or ModelOpt's hf_quant_config.json). With --load-format "
                 "dummy: random decoder linears in that kind's form (awq, gptq, compressed-tensors: int4 groups "
                 "of 128 or config.json's quantization_config.group_size; int8, for dummy only: int8 per channel; "
                 "fp8, modelopt: fp8 per channel)")
      ->check(CLI::IsMember({"awq", "gptq", "compressed-tensors", "modelopt", "fp8", "int8", "none"}));
}

void ModelOptions::add_to(CLI::App& cmd) {
  cmd.add_option("-m,--model", model, "HF safetensors directory or .gguf file (default: the bundled stories260K)");
  cmd.add_option("--load-format", load_format,
                 "auto | dummy (random weights of the config's shape, for speed runs; with --quantization, the "
                 "decoder linears in that kind's form)")
      ->check(CLI::IsMember({"auto", "dummy"}));
  cmd.add_option("-t,--threads", threads, "CPU threads (default: all cores)");
  cmd.add_option("--rope-freq-dtype", rope_freq_dtype,
                 "float32 (as transformers' from_pretrained, vLLM, llama.cpp) | checkpoint (rounded to the "
                 "checkpoint dtype, as a transformers model after .to(bfloat16))")
      ->check(CLI::IsMember({"float32", "checkpoint"}));
  add_quantization_option(cmd, quantization);
  cmd.add_option("--activation-quantization", activation_quantization,
                 "auto | none: FP8 checkpoints whose quantization_config quantizes the linears' inputs too (W8A8: "
                 "FP8_DYNAMIC per token, or a static input_scale) compute that way with auto, as vLLM does; none "
                 "keeps the inputs unquantized (weight-only); on the CPU, GGUF 4-bit weights multiply int8 "
                 "activation blocks with auto, as llama.cpp does, and fp32 inputs with none")
      ->check(CLI::IsMember({"auto", "none"}));
  cmd.add_option("--quantize-lm-head", quantize_lm_head,
                 "none | fp8 | int8 | w4: quantize the output projection at start-up, which most quantized "
                 "checkpoints keep in 16 bits (fp8: e4m3 per row with per-token FP8 inputs; int8: per row, "
                 "symmetric; w4: groups of 128 with zero points; the round-to-nearest of --fallback-quantization)")
      ->check(CLI::IsMember({"none", "fp8", "int8", "w4"}));
  cmd.add_option("--quantize-embeddings", quantize_embeddings,
                 "none | fp8 | int8 | w4: quantize the embedding table at start-up, as llama.cpp's "
                 "--token-embedding-type (the same quantizers as --quantize-lm-head, a row per vocabulary entry; "
                 "a lookup reads one row a token, so this saves memory, not time; a tied lm_head keeps the "
                 "table's own values)")
      ->check(CLI::IsMember({"none", "fp8", "int8", "w4"}));
  cmd.add_option("--tokenizer", tokenizer,
                 "HF directory whose tokenizer.json, or GGUF file whose tokenizer, replaces the checkpoint's (e.g. "
                 "for a quantized checkpoint without tokenizer files, such as one `pagoda quantize` wrote from a GGUF)");
}

LoadOptions ModelOptions::load_options() const {
  LoadOptions opts;
  opts.model_path = model.empty() ? default_model_path() : model;
  opts.format = load_format == "dummy" ? LoadFormat::kDummy : LoadFormat::kAuto;
  opts.rope_freq_dtype = rope_freq_dtype == "checkpoint" ? RopeFreqDtype::kCheckpoint : RopeFreqDtype::kFloat32;
  opts.quantization = quantization;
  opts.tokenizer_path = tokenizer;
  opts.quantize_activations = activation_quantization != "none";
  return opts;
}

std::string find_bundled_file(const std::string& relative) {
  std::array<char, 4096> exe{};
  std::vector<fs::path> candidates;
  const ssize_t n = ::readlink("/proc/self/exe", exe.data(), exe.size() - 1);
  if (n > 0) {
    fs::path dir = fs::path(std::string(exe.data(), static_cast<size_t>(n))).parent_path();
    for (int up = 0; up < 4 && !dir.empty(); ++up, dir = dir.parent_path()) candidates.push_back(dir / relative);
  }
  candidates.push_back(fs::path(PAGODA_SOURCE_DIR) / relative);
  candidates.push_back(fs::current_path() / relative);
  for (const fs::path& p : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

std::string default_model_path() {
  const std::string path = find_bundled_file("models/stories260K.gguf");
  if (path.empty()) throw Error("the bundled model models/stories260K.gguf was not found; pass --model PATH");
  return path;
}

std::string default_calibration_path() {
  const std::string path = find_bundled_file("data/calibration/tinystories_calibration.txt");
  if (path.empty())
    throw Error("the bundled calibration text data/calibration/tinystories_calibration.txt was not found; pass "
                "--calibration-file PATH");
  return path;
}

}  // namespace pagoda::cli
