// ModelConfig from a GGUF file's llama.* and tokenizer.ggml.* metadata, including recovery of llama3 rope
// scaling from the rope_freqs tensor that llama.cpp stores instead of the scaling parameters.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

#include "pagoda/core/error.h"
#include "pagoda/loader/gguf_loader.h"

namespace pagoda {
namespace {

int positive(const GgufFile& f, const std::string& key, std::optional<int64_t> v) {
  if (!v) throw LoadError(f.path(), fmt::format("missing metadata {}", key));
  if (*v <= 0 || *v > (int64_t{1} << 30))
    throw LoadError(f.path(), fmt::format("metadata {} = {} is invalid", key, *v));
  return static_cast<int>(*v);
}

// llama.cpp's freq factor for rotary pair i: the divisor HF's llama3 scaling applies to inv_freq[i].
double llama3_freq_factor(const RopeConfig& r, int i, int head_dim) {
  const double inv_freq = std::pow(r.theta, -2.0 * i / head_dim);
  const double wavelen = 2 * std::numbers::pi / inv_freq;
  const double old_ctx = r.original_max_position_embeddings;
  if (wavelen < old_ctx / r.high_freq_factor) return 1.0;
  if (wavelen > old_ctx / r.low_freq_factor) return r.factor;
  const double smooth = (old_ctx / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  return 1.0 / ((1 - smooth) / r.factor + smooth);
}

// Llama 3.1+ GGUFs carry llama3 scaling as rope_freqs.weight ([head_dim / 2] F32 divisors). Pagoda computes
// the scaling from parameters, so recover them: factor is the largest divisor, the frequency factors and
// original context are Meta's (1, 4, 8192, as in every Llama 3.x release) unless the metadata says otherwise,
// and the whole table must then match.
void read_rope_freqs(const GgufFile& f, ModelConfig& c) {
  const GgufTensorInfo* t = f.find_tensor("rope_freqs.weight");
  if (t == nullptr) return;
  const int64_t n = c.head_dim / 2;
  if (t->dtype != DType::kF32 || t->shape != std::vector<int64_t>{n})
    throw LoadError(f.path(), fmt::format("rope_freqs.weight must be F32 [{}]", n));
  std::vector<float> freqs(static_cast<size_t>(n));
  std::memcpy(freqs.data(), t->data, t->nbytes);
  RopeConfig r = c.rope;
  r.type = RopeType::kLlama3;
  r.factor = *std::max_element(freqs.begin(), freqs.end());
  r.low_freq_factor = 1.0;
  r.high_freq_factor = 4.0;
  r.original_max_position_embeddings =
      static_cast<int>(f.get_int("llama.rope.scaling.original_context_length").value_or(8192));
  for (int i = 0; i < n; ++i) {
    const double expected = llama3_freq_factor(r, i, c.head_dim);
    if (std::abs(freqs[static_cast<size_t>(i)] - expected) > 1e-3 * expected)
      throw LoadError(f.path(), fmt::format("rope_freqs.weight[{}] = {} does not match llama3 rope scaling "
                                            "(factor {}, expected {}); unsupported rope frequency table",
                                            i, freqs[static_cast<size_t>(i)], r.factor, expected));
  }
  c.rope = r;
}

}  // namespace

ModelConfig gguf_model_config(const GgufFile& f) {
  const auto arch = f.get_string("general.architecture");
  if (!arch) throw LoadError(f.path(), "missing metadata general.architecture");
  if (*arch != "llama") throw LoadError(f.path(), fmt::format("unsupported architecture {} (only llama)", *arch));

  ModelConfig c;
  c.architecture = "llama";
  c.hidden_size = positive(f, "llama.embedding_length", f.get_int("llama.embedding_length"));
  c.intermediate_size = positive(f, "llama.feed_forward_length", f.get_int("llama.feed_forward_length"));
  c.num_layers = positive(f, "llama.block_count", f.get_int("llama.block_count"));
  c.num_heads = positive(f, "llama.attention.head_count", f.get_int("llama.attention.head_count"));
  c.num_kv_heads = f.has("llama.attention.head_count_kv")
                       ? positive(f, "llama.attention.head_count_kv", f.get_int("llama.attention.head_count_kv"))
                       : c.num_heads;
  if (c.num_heads % c.num_kv_heads != 0)
    throw LoadError(f.path(), fmt::format("head_count {} is not a multiple of head_count_kv {}", c.num_heads,
                                          c.num_kv_heads));
  c.max_position_embeddings = positive(f, "llama.context_length", f.get_int("llama.context_length"));

  const auto key_length = f.get_int("llama.attention.key_length");
  const auto value_length = f.get_int("llama.attention.value_length");
  const auto rope_dims = f.get_int("llama.rope.dimension_count");
  if (key_length) {
    c.head_dim = positive(f, "llama.attention.key_length", key_length);
  } else if (rope_dims) {
    c.head_dim = positive(f, "llama.rope.dimension_count", rope_dims);
  } else {
    if (c.hidden_size % c.num_heads != 0)
      throw LoadError(f.path(), "embedding_length is not a multiple of head_count and key_length is not given");
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (value_length && *value_length != c.head_dim)
    throw LoadError(f.path(), fmt::format("value_length {} != key_length {} is not supported", *value_length,
                                          c.head_dim));
  if (rope_dims && *rope_dims != c.head_dim)
    throw LoadError(f.path(), fmt::format("partial rotary embedding (rope.dimension_count {} < head_dim {}) is not "
                                          "supported", *rope_dims, c.head_dim));
  if (c.head_dim % 2 != 0) throw LoadError(f.path(), fmt::format("head_dim {} must be even", c.head_dim));

  c.rms_norm_eps = f.get_float("llama.attention.layer_norm_rms_epsilon").value_or(1e-5);
  if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1))
    throw LoadError(f.path(), fmt::format("llama.attention.layer_norm_rms_epsilon {} must be a positive number below 1",
                                          c.rms_norm_eps));
  c.rope.theta = f.get_float("llama.rope.freq_base").value_or(10000.0);
  if (!(c.rope.theta > 0) || !std::isfinite(c.rope.theta))
    throw LoadError(f.path(), fmt::format("llama.rope.freq_base {} must be a positive number", c.rope.theta));
  if (const auto scaling = f.get_string("llama.rope.scaling.type"); scaling && *scaling != "none")
    throw LoadError(f.path(), fmt::format("rope scaling type {} is not supported", *scaling));
  if (f.get_float("llama.rope.scale_linear").value_or(1.0) != 1.0)
    throw LoadError(f.path(), "linear rope scaling (llama.rope.scale_linear) is not supported");
  read_rope_freqs(f, c);

  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (const auto v = f.get_int("llama.vocab_size")) {
    c.vocab_size = positive(f, "llama.vocab_size", v);
  } else if (embd != nullptr && embd->shape.size() == 2) {
    c.vocab_size = static_cast<int>(embd->shape[0]);
  } else if (const auto tokens = f.get_strings("tokenizer.ggml.tokens")) {
    c.vocab_size = static_cast<int>(tokens->size());
  } else {
    throw LoadError(f.path(), "cannot tell the vocabulary size (no llama.vocab_size, token_embd or tokens)");
  }
  // The tokenizer's tokens and the embedding's rows are the same vocabulary (llama.cpp refuses a file where they
  // differ): fewer tokens left generated ids without text, more let prompts reach ids the model has no row for.
  if (const auto tokens = f.get_strings("tokenizer.ggml.tokens"); tokens && embd != nullptr && embd->shape.size() == 2 &&
                                                                   static_cast<int64_t>(tokens->size()) != embd->shape[0])
    throw LoadError(f.path(), fmt::format("tokenizer.ggml.tokens holds {} tokens but token_embd.weight has {} rows",
                                          tokens->size(), embd->shape[0]));
  // llama.cpp writes no lm_head when it is the embedding.
  c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;

  // The compute dtype: that of the attention weights when they are plain floats; F16 for quantised files.
  c.dtype = DType::kF16;
  if (const GgufTensorInfo* q = f.find_tensor("blk.0.attn_q.weight"); q && ggml_type_is_float(q->type))
    c.dtype = q->dtype;

  auto token = [&](const char* key) -> std::optional<TokenId> {
    const auto v = f.get_int(key);
    // llama.cpp writes -1 (often as u32 0xffffffff) for "no such token".
    if (!v || *v == -1 || *v == 0xffffffffll) return std::nullopt;
    if (*v < 0 || *v >= c.vocab_size)
      throw LoadError(f.path(), fmt::format("metadata {} = {} is out of range", key, *v));
    return static_cast<TokenId>(*v);
  };
  c.bos_token_id = token("tokenizer.ggml.bos_token_id");
  for (const char* key :
       {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    const auto id = token(key);
    if (id && std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), *id) == c.eos_token_ids.end())
      c.eos_token_ids.push_back(*id);
  }
  return c;
}

}  // namespace pagoda
