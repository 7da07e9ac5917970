// `pagoda inspect MODEL`: what a checkpoint is, without running it.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "pagoda/cli/commands.h"
#include "pagoda/cli/model_options.h"
#include "pagoda/loader/gguf_blocks.h"
#include "pagoda/loader/weight_mapping.h"

namespace pagoda::cli {
namespace {

// The format of one weight: its dtype, or its scheme and group size (and zero points or offsets, when it holds
// them) with the file format it came from: a GGUF block type ("Q4_K -> int4-group g32 +offsets") or a safetensors
// checkpoint's own format ("awq gemm g128 -> int4-group g128 +zeros").
std::string format_of(const Weight& w) {
  std::string kind = w.quantized() ? fmt::format("{} g{}", quant_scheme_name(w.scheme), w.group_size)
                                   : std::string(dtype_name(w.data.dtype));
  if (w.quantized() && !w.zeros.empty()) kind += " +zeros";
  if (w.quantized() && !w.offsets.empty()) kind += " +offsets";
  if (is_fp8_activations(w.activations)) kind += fmt::format(" W8A8 ({})", activation_quant_name(w.activations));
  if (w.activations == ActivationQuant::kInt8Block) kind += " (CPU: int8 activation blocks of 32)";
  if (w.activations == ActivationQuant::kInt8SuperBlock) kind += " (CPU: int8 activation blocks of 256)";
  if (!w.source_format.empty()) kind = fmt::format("{} -> {}", w.source_format, kind);
  return kind;
}

// Weights are grouped by format: dtype, or scheme and group size ("int4-group g128"), with the checkpoint
// format they were converted from when it has a name of its own ("Q4_K -> int4-group g32 +offsets",
// "gptq v1 4-bit asym act-order g64 -> int4-group g64 +zeros").
void add_weight(std::map<std::string, std::pair<int64_t, int64_t>>& by_dtype, const Weight& w) {
  const std::string kind = format_of(w);
  auto& [count, bytes] = by_dtype[kind];
  count += w.num_rows() * w.cols();
  bytes += w.nbytes();  // codes, scales, zeros or offsets, and g_idx
}

// --layers: every weight under its checkpoint name, with its format, shape, bytes and bits per weight
// (in memory; for GGUF block types also in the file).
void print_layers(const LoadedModel& m) {
  ModelWeights copy;  // the slots point into it; then filled with the model's views, element by element
  const std::vector<WeightSlot> slots = weight_slots(m.config, copy);
  copy.embed_tokens = m.weights.embed_tokens;
  for (size_t l = 0; l < copy.layers.size(); ++l) copy.layers[l] = m.weights.layers[l];
  copy.final_norm = m.weights.final_norm;
  copy.lm_head = m.weights.lm_head;
  const bool gguf = m.format == "gguf";
  size_t name_width = 36, format_width = 34;  // the columns line up, however long a name or format is
  for (const WeightSlot& slot : slots) {
    name_width = std::max(name_width, (gguf ? gguf_weight_name(slot) : hf_weight_name(slot)).size());
    format_width = std::max(format_width, format_of(*slot.target).size());
  }
  for (const WeightSlot& slot : slots) {
    const Weight& w = *slot.target;
    const int64_t params = w.num_rows() * w.cols();
    std::string file_bits;
    if (const auto info = ggml_type_by_name(w.source_format))
      file_bits = fmt::format(" (file {:.4g})", 8.0 * static_cast<double>(info->block_bytes) /
                                                    static_cast<double>(info->block_elems));
    const std::string shape = w.data.ndim == 1 ? fmt::format("[{}]", w.cols())
                                               : fmt::format("[{}, {}]", w.num_rows(), w.cols());
    fmt::print("  {:<{}} {:<{}} {:<14} {:>12} bytes {:6.3g} bits/weight{}\n",
               gguf ? gguf_weight_name(slot) : hf_weight_name(slot), name_width, format_of(w), format_width, shape,
               w.nbytes(), 8.0 * static_cast<double>(w.nbytes()) / static_cast<double>(params), file_bits);
  }
}

void run_inspect(const ModelOptions& o, bool layers) {
  const LoadedModel m = load_model(o.load_options());
  const ModelConfig& c = m.config;
  std::map<std::string, std::pair<int64_t, int64_t>> by_dtype;  // dtype -> (parameters, bytes)
  for (const Weight* w : m.weights.all())
    if (w != &m.weights.lm_head || !c.tie_word_embeddings) add_weight(by_dtype, *w);
  int64_t total_bytes = 0;
  for (const auto& [name, v] : by_dtype) total_bytes += v.second;

  fmt::print("model:         {} ({})\n", m.source, m.format);
  fmt::print("architecture:  {}, {} layers, hidden {}, ffn {}, heads {} (kv {}), head_dim {}\n", c.architecture,
             c.num_layers, c.hidden_size, c.intermediate_size, c.num_heads, c.num_kv_heads, c.head_dim);
  fmt::print("parameters:    {} ({:.2f} M){}\n", c.num_parameters(), c.num_parameters() / 1e6,
             c.tie_word_embeddings ? ", tied embeddings" : "");
  size_t format_width = 40;
  for (const auto& [name, v] : by_dtype) format_width = std::max(format_width, name.size());
  for (const auto& [name, v] : by_dtype)
    fmt::print("  {:<{}} {:>14} params {:>10.2f} MiB  {:5.2f} bits/weight\n", name, format_width, v.first,
               v.second / 1048576.0, 8.0 * static_cast<double>(v.second) / static_cast<double>(v.first));
  fmt::print("weights:       {:.2f} MiB\n", total_bytes / 1048576.0);
  fmt::print("context:       {} tokens; rope theta {}{}\n", c.max_position_embeddings, c.rope.theta,
             c.rope.type == RopeType::kLlama3 ? fmt::format(", llama3 scaling x{}", c.rope.factor) : "");
  const int64_t kv_rows = 2LL * c.num_layers * c.num_kv_heads;  // K and V rows of a token
  fmt::print("kv cache:      {} bytes per token (fp32 on the CPU), {} in bf16 (the GPU), {} with --kv-cache-dtype fp8\n",
             kv_rows * c.head_dim * 4, kv_rows * c.head_dim * 2, kv_rows * (c.head_dim + 1));
  fmt::print("tokenizer:     {}\n", m.tokenizer ? m.tokenizer->summary() : "none");
  if (layers) {
    fmt::print("weights by tensor:\n");
    print_layers(m);
  }
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto opts = std::make_shared<ModelOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "Describe a model: architecture, parameters, dtypes, tokenizer");
  cmd->add_option("model,-m,--model", opts->model,
                  "HF safetensors directory or .gguf file (default: the bundled model)");
  cmd->add_option("--load-format", opts->load_format, "auto | dummy")->check(CLI::IsMember({"auto", "dummy"}));
  add_quantization_option(*cmd, opts->quantization);
  auto layers = std::make_shared<bool>(false);
  cmd->add_flag("--layers", *layers, "Also list every weight: format, shape, bytes and bits per weight");
  cmd->callback([opts, layers] { run_inspect(*opts, *layers); });
}

}  // namespace pagoda::cli
