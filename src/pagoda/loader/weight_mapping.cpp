// Canonical weight slots of a Llama model and their HF / GGUF names.
#include "pagoda/loader/weight_mapping.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

#include "pagoda/core/error.h"

namespace pagoda {

std::vector<WeightSlot> weight_slots(const ModelConfig& c, ModelWeights& w) {
  const int64_t h = c.hidden_size;
  const int64_t q = static_cast<int64_t>(c.num_heads) * c.head_dim;
  const int64_t kv = static_cast<int64_t>(c.num_kv_heads) * c.head_dim;
  const int64_t ffn = c.intermediate_size;
  w.layers.assign(static_cast<size_t>(c.num_layers), LayerWeights{});
  std::vector<WeightSlot> slots;
  slots.push_back({WeightRole::kEmbedTokens, -1, {c.vocab_size, h}, &w.embed_tokens});
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    slots.push_back({WeightRole::kAttnNorm, i, {h}, &l.attn_norm});
    slots.push_back({WeightRole::kWq, i, {q, h}, &l.wq});
    slots.push_back({WeightRole::kWk, i, {kv, h}, &l.wk});
    slots.push_back({WeightRole::kWv, i, {kv, h}, &l.wv});
    slots.push_back({WeightRole::kWo, i, {h, q}, &l.wo});
    slots.push_back({WeightRole::kFfnNorm, i, {h}, &l.ffn_norm});
    slots.push_back({WeightRole::kGate, i, {ffn, h}, &l.w_gate});
    slots.push_back({WeightRole::kUp, i, {ffn, h}, &l.w_up});
    slots.push_back({WeightRole::kDown, i, {h, ffn}, &l.w_down});
  }
  slots.push_back({WeightRole::kFinalNorm, -1, {h}, &w.final_norm});
  if (!c.tie_word_embeddings) slots.push_back({WeightRole::kLmHead, -1, {c.vocab_size, h}, &w.lm_head});
  return slots;
}

void check_layer_count(const ModelConfig& config, size_t num_tensors, const std::string& path) {
  // Every layer needs nine tensors; fewer tensors than layers cannot be a model at all. (Fewer than nine a
  // layer is left to the slot-by-slot checks, which name the first missing tensor.)
  if (static_cast<int64_t>(num_tensors) < config.num_layers)
    throw LoadError(path, fmt::format("the config has {} layers, but the file holds only {} tensors",
                                      config.num_layers, num_tensors));
}

void check_no_layers_beyond(const ModelConfig& config, const std::vector<std::string_view>& names,
                            std::string_view layer_prefix, const std::string& path) {
  for (const std::string_view name : names) {
    if (!name.starts_with(layer_prefix)) continue;
    int64_t layer = 0;
    size_t i = layer_prefix.size();
    if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) continue;
    for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])) && layer <= config.num_layers; ++i)
      layer = layer * 10 + (name[i] - '0');
    if (layer >= config.num_layers)
      throw LoadError(path, fmt::format("tensor {} belongs to a layer beyond the config's {} layers (was the layer "
                                        "count edited?)", name, config.num_layers));
  }
}

void tie_lm_head(const ModelConfig& config, ModelWeights& weights) {
  if (config.tie_word_embeddings) weights.lm_head = weights.embed_tokens;
}

std::string hf_weight_name(const WeightSlot& s) {
  const std::string layer = fmt::format("model.layers.{}.", s.layer);
  switch (s.role) {
    case WeightRole::kEmbedTokens: return "model.embed_tokens.weight";
    case WeightRole::kAttnNorm: return layer + "input_layernorm.weight";
    case WeightRole::kWq: return layer + "self_attn.q_proj.weight";
    case WeightRole::kWk: return layer + "self_attn.k_proj.weight";
    case WeightRole::kWv: return layer + "self_attn.v_proj.weight";
    case WeightRole::kWo: return layer + "self_attn.o_proj.weight";
    case WeightRole::kFfnNorm: return layer + "post_attention_layernorm.weight";
    case WeightRole::kGate: return layer + "mlp.gate_proj.weight";
    case WeightRole::kUp: return layer + "mlp.up_proj.weight";
    case WeightRole::kDown: return layer + "mlp.down_proj.weight";
    case WeightRole::kFinalNorm: return "model.norm.weight";
    case WeightRole::kLmHead: return "lm_head.weight";
  }
  return "?";
}

std::string gguf_weight_name(const WeightSlot& s) {
  const std::string layer = fmt::format("blk.{}.", s.layer);
  switch (s.role) {
    case WeightRole::kEmbedTokens: return "token_embd.weight";
    case WeightRole::kAttnNorm: return layer + "attn_norm.weight";
    case WeightRole::kWq: return layer + "attn_q.weight";
    case WeightRole::kWk: return layer + "attn_k.weight";
    case WeightRole::kWv: return layer + "attn_v.weight";
    case WeightRole::kWo: return layer + "attn_output.weight";
    case WeightRole::kFfnNorm: return layer + "ffn_norm.weight";
    case WeightRole::kGate: return layer + "ffn_gate.weight";
    case WeightRole::kUp: return layer + "ffn_up.weight";
    case WeightRole::kDown: return layer + "ffn_down.weight";
    case WeightRole::kFinalNorm: return "output_norm.weight";
    case WeightRole::kLmHead: return "output.weight";
  }
  return "?";
}

bool is_norm(WeightRole role) {
  return role == WeightRole::kAttnNorm || role == WeightRole::kFfnNorm || role == WeightRole::kFinalNorm;
}

bool is_linear(WeightRole role) {
  return role != WeightRole::kEmbedTokens && role != WeightRole::kLmHead && !is_norm(role);
}

void check_weight_shape(const std::string& file, const std::string& name, std::span<const int64_t> shape,
                        const WeightSlot& slot) {
  if (!std::equal(shape.begin(), shape.end(), slot.shape.begin(), slot.shape.end()))
    throw LoadError(file, fmt::format("tensor {} has shape [{}], expected [{}]", name, fmt::join(shape, ", "),
                                      fmt::join(slot.shape, ", ")));
}

}  // namespace pagoda
