// ModelConfig: the architecture hyper-parameters of a decoder-only transformer, read from an HF
// config.json or from GGUF metadata. Everything downstream (weights, model, KV cache) sizes itself from it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pagoda/core/dtype.h"
#include "pagoda/core/types.h"

namespace pagoda {

enum class RopeType { kDefault, kLlama3 };

struct RopeConfig {
  RopeType type = RopeType::kDefault;
  double theta = 10000.0;
  // llama3 scaling (rope_type "llama3"); ignored for kDefault.
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
  // Precision the inverse frequencies are rounded to: F32 unless LoadOptions::rope_freq_dtype asks for the
  // checkpoint dtype (bf16 rounding moves a frequency by up to 0.2%, an angle error that grows with the
  // distance between tokens).
  DType inv_freq_dtype = DType::kF32;
};

struct ModelConfig {
  std::string architecture = "llama";  // the only one for now
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // hidden_size / num_heads unless the config says otherwise
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-5;
  RopeConfig rope;
  bool tie_word_embeddings = false;
  DType dtype = DType::kBF16;  // the checkpoint's declared compute dtype

  std::optional<TokenId> bos_token_id;
  std::vector<TokenId> eos_token_ids;  // config.json may give an int or a list

  int64_t num_parameters() const;  // embedding + layers + norm (+ lm_head when untied)
};

// Sampling defaults a checkpoint ships in generation_config.json; unset fields keep Pagoda's defaults.
struct GenerationDefaults {
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int> top_k;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::vector<TokenId> eos_token_ids;
};

}  // namespace pagoda
