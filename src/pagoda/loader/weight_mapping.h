// The list of weights a Llama-family model needs, with their expected shapes, canonical slots in
// ModelWeights, and their names in HF safetensors and GGUF checkpoints.
#pragma once

#include <span>
#include <string_view>
#include <string>
#include <vector>

#include "pagoda/loader/model_config.h"
#include "pagoda/loader/model_weights.h"

namespace pagoda {

enum class WeightRole { kEmbedTokens, kAttnNorm, kWq, kWk, kWv, kWo, kFfnNorm, kGate, kUp, kDown, kFinalNorm, kLmHead };

struct WeightSlot {
  WeightRole role;
  int layer;                   // -1 for weights outside the layer stack
  std::vector<int64_t> shape;  // expected, row-major ([out_features, in_features] for linear weights)
  Weight* target;              // where the loaded view goes
};

// Every weight `config` needs, in checkpoint order; sizes weights.layers. lm_head is left out when tied
// (bind it with tie_lm_head once embed_tokens is loaded).
std::vector<WeightSlot> weight_slots(const ModelConfig& config, ModelWeights& weights);
// A checkpoint file holding fewer tensors than the config has layers cannot be the model: a LoadError
// naming `path`, before anything per layer is allocated (a file claiming millions of layers must not make
// the loader allocate for them).
void check_layer_count(const ModelConfig& config, size_t num_tensors, const std::string& path);
// A tensor of a layer the config does not have (`layer_prefix` + N + "." with N >= num_layers: "model.layers." in HF
// checkpoints, "blk." in GGUF) means the config and the file disagree: a num_hidden_layers edited down would run a
// truncated model. Throws LoadError naming the tensor.
void check_no_layers_beyond(const ModelConfig& config, const std::vector<std::string_view>& names,
                            std::string_view layer_prefix, const std::string& path);
void tie_lm_head(const ModelConfig& config, ModelWeights& weights);

std::string hf_weight_name(const WeightSlot& slot);    // "model.layers.3.self_attn.q_proj.weight"
std::string gguf_weight_name(const WeightSlot& slot);  // "blk.3.attn_q.weight"
bool is_norm(WeightRole role);
// The decoder layers' linears (wq, wk, wv, wo, w_gate, w_up, w_down): the weights a quantized format quantizes.
bool is_linear(WeightRole role);

// Throws LoadError(file, "tensor X has shape [..], expected [..]").
void check_weight_shape(const std::string& file, const std::string& name, std::span<const int64_t> shape,
                        const WeightSlot& slot);

}  // namespace pagoda
