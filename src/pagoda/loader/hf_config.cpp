// HF config.json -> ModelConfig (transformers 4 `rope_theta`/`rope_scaling`/`torch_dtype` and transformers 5
// `rope_parameters`/`dtype` forms) and generation_config.json -> GenerationDefaults.
#include "pagoda/loader/hf_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "pagoda/core/error.h"
#include "pagoda/core/logging.h"

namespace pagoda {
namespace {

using nlohmann::json;

// JSON field access that turns every type problem into a LoadError naming the file and the field.
// A field set to null counts as absent, as transformers treats it.
class Fields {
 public:
  Fields(const std::string& path, const json& obj, std::string prefix = "")
      : path_(path), obj_(obj), prefix_(std::move(prefix)) {}

  const json* get(const std::string& key) const {
    const auto it = obj_.find(key);
    return (it == obj_.end() || it->is_null()) ? nullptr : &*it;
  }
  bool has(const std::string& key) const { return get(key) != nullptr; }

  std::optional<int64_t> opt_int(const std::string& key) const {
    const json* v = get(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number_integer()) fail(key, "must be an integer");
    return v->get<int64_t>();
  }
  int positive_int(const std::string& key) const {
    const auto v = opt_int(key);
    if (!v) fail(key, "is missing");
    if (*v <= 0 || *v > (int64_t{1} << 30)) fail(key, fmt::format("must be a positive integer, got {}", *v));
    return static_cast<int>(*v);
  }
  std::optional<double> opt_number(const std::string& key) const {
    const json* v = get(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) fail(key, "must be a number");
    return v->get<double>();
  }
  std::optional<std::string> opt_string(const std::string& key) const {
    const json* v = get(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) fail(key, "must be a string");
    return v->get<std::string>();
  }
  std::optional<bool> opt_bool(const std::string& key) const {
    const json* v = get(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) fail(key, "must be true or false");
    return v->get<bool>();
  }
  // An int or a list of ints (eos_token_id); absent -> empty.
  std::vector<TokenId> token_ids(const std::string& key) const {
    const json* v = get(key);
    std::vector<TokenId> ids;
    if (v == nullptr) return ids;
    auto one = [&](const json& x) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX)
        fail(key, "must be a token id or a list of token ids");
      ids.push_back(static_cast<TokenId>(x.get<int64_t>()));
    };
    if (v->is_array()) {
      for (const json& x : *v) one(x);
    } else {
      one(*v);
    }
    return ids;
  }

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw LoadError(path_, fmt::format("{}{} {}", prefix_, key, problem));
  }

 private:
  const std::string& path_;
  const json& obj_;
  std::string prefix_;
};

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw LoadError(path, "cannot open");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw LoadError(path, std::string("bad JSON: ") + e.what());
  }
  if (!j.is_object()) throw LoadError(path, "not a JSON object");
  return j;
}

// Llama and Mistral checkpoints share one tensor layout; anything else needs its own model code.
void check_architecture(const std::string& path, const Fields& f) {
  static const char* kArchitectures[] = {"LlamaForCausalLM", "MistralForCausalLM"};
  static const char* kModelTypes[] = {"llama", "mistral"};
  if (const json* archs = f.get("architectures")) {
    if (!archs->is_array()) f.fail("architectures", "must be a list");
    for (const json& a : *archs) {
      const std::string name = a.is_string() ? a.get<std::string>() : a.dump();
      if (std::find(std::begin(kArchitectures), std::end(kArchitectures), name) == std::end(kArchitectures))
        throw LoadError(path, fmt::format("unsupported architecture {} (supported: LlamaForCausalLM, "
                                          "MistralForCausalLM)", name));
    }
  }
  const auto model_type = f.opt_string("model_type");
  if (model_type &&
      std::find(std::begin(kModelTypes), std::end(kModelTypes), *model_type) == std::end(kModelTypes))
    throw LoadError(path, fmt::format("unsupported architecture {} (model_type; supported: llama, mistral)",
                                      *model_type));
  if (!model_type && !f.has("architectures")) throw LoadError(path, "neither model_type nor architectures is set");
  // Pagoda's Llama has no biases and uses SiLU; a config that says otherwise has weights we would ignore.
  if (f.opt_bool("attention_bias").value_or(false)) throw LoadError(path, "attention_bias = true is not supported");
  if (f.opt_bool("mlp_bias").value_or(false)) throw LoadError(path, "mlp_bias = true is not supported");
  if (const auto act = f.opt_string("hidden_act"); act && *act != "silu")
    throw LoadError(path, fmt::format("unsupported hidden_act {} (only silu)", *act));
}

RopeType parse_rope_type(const Fields& f, const std::string& field, const std::string& type) {
  if (type == "default") return RopeType::kDefault;
  if (type == "llama3") return RopeType::kLlama3;
  f.fail(field, fmt::format("rope type {} is not supported (supported: default, llama3)", type));
}

// transformers 4: rope_theta at top level, rope_scaling null or {rope_type|type, ...}.
// transformers 5: rope_parameters {rope_type, rope_theta, ...}. Both share the llama3 parameter names.
RopeConfig parse_rope(const std::string& path, const Fields& f) {
  RopeConfig rope;
  rope.theta = f.opt_number("rope_theta").value_or(10000.0);
  const auto check_theta = [&] {
    if (!(rope.theta > 0) || !std::isfinite(rope.theta)) f.fail("rope_theta", "must be a positive number");
  };
  const char* section = f.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  const json* params = f.get(section);
  if (params == nullptr) {
    check_theta();
    return rope;
  }
  if (!params->is_object()) f.fail(section, "must be an object");
  const Fields p(path, *params, std::string(section) + ".");
  if (const auto theta = p.opt_number("rope_theta")) rope.theta = *theta;
  auto type = p.opt_string("rope_type");
  if (!type) type = p.opt_string("type");  // older transformers 4 spelling
  rope.type = parse_rope_type(p, "rope_type", type.value_or("default"));
  if (rope.type == RopeType::kLlama3) {
    const auto factor = p.opt_number("factor");
    if (!factor || !std::isfinite(*factor) || *factor < 1) p.fail("factor", "must be a number >= 1 for llama3 rope");
    rope.factor = *factor;
    rope.low_freq_factor = p.opt_number("low_freq_factor").value_or(rope.low_freq_factor);
    rope.high_freq_factor = p.opt_number("high_freq_factor").value_or(rope.high_freq_factor);
    if (rope.high_freq_factor <= rope.low_freq_factor)
      p.fail("high_freq_factor", "must be larger than low_freq_factor");
    rope.original_max_position_embeddings =
        static_cast<int>(p.opt_int("original_max_position_embeddings").value_or(rope.original_max_position_embeddings));
    if (rope.original_max_position_embeddings <= 0) p.fail("original_max_position_embeddings", "must be positive");
  }
  check_theta();
  return rope;
}

DType parse_dtype(const Fields& f) {
  const char* key = f.has("dtype") ? "dtype" : "torch_dtype";
  const auto s = f.opt_string(key);
  if (!s) return DType::kBF16;  // undeclared: BF16, the dtype Llama checkpoints are trained and shipped in
  if (*s == "bfloat16") return DType::kBF16;
  if (*s == "float16") return DType::kF16;
  if (*s == "float32") return DType::kF32;
  f.fail(key, fmt::format("{} is not supported (bfloat16, float16, float32)", *s));
}

}  // namespace

ModelConfig parse_hf_config(const std::string& config_json_path) {
  const std::string& path = config_json_path;
  const json j = read_json(path);
  const Fields f(path, j);
  check_architecture(path, f);

  ModelConfig c;
  c.architecture = "llama";
  c.vocab_size = f.positive_int("vocab_size");
  c.hidden_size = f.positive_int("hidden_size");
  c.intermediate_size = f.positive_int("intermediate_size");
  c.num_layers = f.positive_int("num_hidden_layers");
  c.num_heads = f.positive_int("num_attention_heads");
  c.num_kv_heads = f.has("num_key_value_heads") ? f.positive_int("num_key_value_heads") : c.num_heads;
  if (c.num_heads % c.num_kv_heads != 0)
    throw LoadError(path, fmt::format("num_attention_heads {} is not a multiple of num_key_value_heads {}",
                                      c.num_heads, c.num_kv_heads));
  if (f.has("head_dim")) {
    c.head_dim = f.positive_int("head_dim");
  } else {
    if (c.hidden_size % c.num_heads != 0)
      throw LoadError(path, fmt::format("hidden_size {} is not a multiple of num_attention_heads {} and head_dim "
                                        "is not given", c.hidden_size, c.num_heads));
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) f.fail("head_dim", fmt::format("must be even for RoPE, got {}", c.head_dim));
  c.max_position_embeddings = f.positive_int("max_position_embeddings");
  c.rms_norm_eps = f.opt_number("rms_norm_eps").value_or(1e-6);  // transformers' LlamaConfig default
  // (an epsilon of 1 or more swamps the activations' mean square: 1e308 gave empty outputs)
  if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1)) f.fail("rms_norm_eps", "must be a positive number below 1");
  c.rope = parse_rope(path, f);
  c.tie_word_embeddings = f.opt_bool("tie_word_embeddings").value_or(false);
  c.dtype = parse_dtype(f);
  if (const auto bos = f.token_ids("bos_token_id"); !bos.empty()) c.bos_token_id = bos.front();
  c.eos_token_ids = f.token_ids("eos_token_id");
  if (c.bos_token_id && *c.bos_token_id >= c.vocab_size)
    f.fail("bos_token_id", fmt::format("{} is outside the vocabulary ({})", *c.bos_token_id, c.vocab_size));
  for (const TokenId eos : c.eos_token_ids)
    if (eos >= c.vocab_size) f.fail("eos_token_id", fmt::format("{} is outside the vocabulary ({})", eos, c.vocab_size));

  // Mistral v0.1 attends within a sliding window; without sliding-window attention Pagoda is exact only
  // for contexts up to the window, so the usable context is capped there.
  if (const auto window = f.opt_int("sliding_window"); window && *window > 0 && *window < c.max_position_embeddings) {
    spdlog::warn("{}: sliding_window {} is not supported; capping the context at {} tokens", path, *window, *window);
    c.max_position_embeddings = static_cast<int>(*window);
  }
  return c;
}

GenerationDefaults parse_generation_config(const std::string& generation_config_json_path) {
  GenerationDefaults g;
  std::error_code ec;
  if (generation_config_json_path.empty() || !std::filesystem::exists(generation_config_json_path, ec)) return g;
  const std::string& path = generation_config_json_path;
  const json j = read_json(path);
  const Fields f(path, j);
  // Only the fields present override Pagoda's defaults (do_sample is not consulted, as in vLLM).
  g.temperature = f.opt_number("temperature");
  g.top_p = f.opt_number("top_p");
  if (const auto k = f.opt_int("top_k")) g.top_k = static_cast<int>(*k);
  g.min_p = f.opt_number("min_p");
  g.repetition_penalty = f.opt_number("repetition_penalty");
  g.eos_token_ids = f.token_ids("eos_token_id");
  return g;
}

}  // namespace pagoda
