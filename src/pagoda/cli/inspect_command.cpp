// `pagoda inspect MODEL`: what a checkpoint is, without running it.
#include <fmt/format.h>

#include <map>

#include "pagoda/cli/commands.h"
#include "pagoda/cli/model_options.h"

namespace pagoda::cli {
namespace {

// Weights are grouped by dtype, quantized linears by scheme and group size ("int4-group g128"), with the
// checkpoint format they were converted from when it has a name of its own ("Q4_K -> int4-group g32").
void add_weight(std::map<std::string, std::pair<int64_t, int64_t>>& by_dtype, const Weight& w) {
  std::string kind = w.quantized() ? fmt::format("{} g{}", quant_scheme_name(w.scheme), w.group_size)
                                   : std::string(dtype_name(w.data.dtype));
  if (w.quantized() && !w.offsets.empty()) kind += " +offsets";
  if (!w.source_format.empty()) kind = fmt::format("{} -> {}", w.source_format, kind);
  auto& [count, bytes] = by_dtype[kind];
  count += w.num_rows() * w.cols();
  bytes += w.nbytes();  // codes, scales, zeros or offsets, and g_idx
}

void run_inspect(const ModelOptions& o) {
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
  for (const auto& [name, v] : by_dtype)
    fmt::print("  {:<34} {:>14} params {:>10.2f} MiB  {:5.2f} bits/weight\n", name, v.first, v.second / 1048576.0,
               8.0 * static_cast<double>(v.second) / static_cast<double>(v.first));
  fmt::print("weights:       {:.2f} MiB\n", total_bytes / 1048576.0);
  fmt::print("context:       {} tokens; rope theta {}{}\n", c.max_position_embeddings, c.rope.theta,
             c.rope.type == RopeType::kLlama3 ? fmt::format(", llama3 scaling x{}", c.rope.factor) : "");
  fmt::print("kv cache:      {} bytes per token (fp32 on the CPU)\n",
             2LL * c.num_layers * c.num_kv_heads * c.head_dim * 4);
  fmt::print("tokenizer:     {}\n", m.tokenizer ? m.tokenizer->summary() : "none");
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto opts = std::make_shared<ModelOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "Describe a model: architecture, parameters, dtypes, tokenizer");
  cmd->add_option("model", opts->model, "HF safetensors directory or .gguf file (default: the bundled model)");
  cmd->add_option("--load-format", opts->load_format, "auto | dummy");
  cmd->callback([opts] { run_inspect(*opts); });
}

}  // namespace pagoda::cli
