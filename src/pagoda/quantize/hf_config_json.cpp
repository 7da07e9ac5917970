// ModelConfig -> an HF Llama config.json.
#include "pagoda/quantize/hf_config_json.h"

#include <fmt/format.h>

#include <string>

#include "pagoda/core/error.h"

namespace pagoda::quantizer {
namespace {

// A float32 value as the decimal a person (and Python) would write for it; other doubles as they are.
double tidy(double v) {
  const auto f = static_cast<float>(v);
  if (static_cast<double>(f) != v) return v;
  return std::stod(fmt::format("{}", f));  // fmt prints a float's shortest round-trip decimal
}

nlohmann::ordered_json token_ids(const std::vector<TokenId>& ids) {
  if (ids.size() == 1) return ids.front();
  return ids;  // a list, as Llama 3 configs give eos_token_id
}

}  // namespace

const char* torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float32";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
    default: break;
  }
  throw Error(fmt::format("no torch dtype for {}", dtype_name(dtype)));
}

nlohmann::ordered_json hf_llama_config_json(const ModelConfig& c, DType dtype) {
  nlohmann::ordered_json j;
  j["architectures"] = nlohmann::ordered_json::array({"LlamaForCausalLM"});
  j["model_type"] = "llama";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  // transformers derives head_dim as hidden_size / num_attention_heads unless told.
  if (c.num_heads * c.head_dim != c.hidden_size) j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = tidy(c.rms_norm_eps);
  j["rope_theta"] = tidy(c.rope.theta);
  if (c.rope.type == RopeType::kLlama3) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", tidy(c.rope.factor)},
                         {"low_freq_factor", tidy(c.rope.low_freq_factor)},
                         {"high_freq_factor", tidy(c.rope.high_freq_factor)},
                         {"original_max_position_embeddings", c.rope.original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (c.bos_token_id) j["bos_token_id"] = *c.bos_token_id;
  if (!c.eos_token_ids.empty()) j["eos_token_id"] = token_ids(c.eos_token_ids);
  j["torch_dtype"] = torch_dtype_name(dtype);
  return j;
}

}  // namespace pagoda::quantizer
