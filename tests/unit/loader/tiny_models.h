// Builders for tiny, complete Llama checkpoints (HF directory, GGUF) written into a temp dir, with options to
// break them in one place; tensor values are a deterministic function of (tensor, element).
#pragma once

#include <cmath>
#include <optional>
#include <set>

#include "pagoda/loader/weight_mapping.h"
#include "test_files.h"

namespace pagoda::test {

inline nlohmann::json tiny_config_json() {
  return {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", 16},
          {"hidden_size", 8},  {"intermediate_size", 12}, {"num_hidden_layers", 2}, {"num_attention_heads", 2},
          {"num_key_value_heads", 1}, {"max_position_embeddings", 64}, {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0}, {"tie_word_embeddings", false}, {"torch_dtype", "float32"},
          {"bos_token_id", 1}, {"eos_token_id", 2}};
}

inline float tiny_value(size_t tensor, size_t i) {
  return std::sin(0.37f * static_cast<float>(i) + static_cast<float>(tensor));
}

struct TinyHfOptions {
  int num_shards = 1;             // > 1: model-0000k-of-0000n.safetensors + index
  std::string skip_tensor;        // left out of the checkpoint
  std::string wrong_shape_tensor; // written with one extra row
};

inline TinyHfOptions sharded(int n) { TinyHfOptions o; o.num_shards = n; return o; }
inline TinyHfOptions skipping(std::string name) { TinyHfOptions o; o.skip_tensor = std::move(name); return o; }
inline TinyHfOptions misshaping(std::string name) { TinyHfOptions o; o.wrong_shape_tensor = std::move(name); return o; }

// Writes config.json + safetensors (F32) for `config` into `dir`. Returns the expected F32 contents by HF name.
inline std::map<std::string, std::vector<float>> write_tiny_hf_model(const std::string& dir,
                                                                     const nlohmann::json& config,
                                                                     const TinyHfOptions& opt = {}) {
  write_text(dir + "/config.json", config.dump(2));
  ModelConfig c;
  c.vocab_size = config["vocab_size"];
  c.hidden_size = config["hidden_size"];
  c.intermediate_size = config["intermediate_size"];
  c.num_layers = config["num_hidden_layers"];
  c.num_heads = config["num_attention_heads"];
  c.num_kv_heads = config.value("num_key_value_heads", c.num_heads);
  c.head_dim = config.value("head_dim", c.hidden_size / c.num_heads);
  c.tie_word_embeddings = config.value("tie_word_embeddings", false);
  ModelWeights w;
  const auto slots = weight_slots(c, w);
  std::map<std::string, std::vector<float>> values;
  std::vector<SafetensorsWriter> shards(static_cast<size_t>(opt.num_shards));
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t s = 0; s < slots.size(); ++s) {
    const std::string name = hf_weight_name(slots[s]);
    if (name == opt.skip_tensor) continue;
    std::vector<int64_t> shape = slots[s].shape;
    if (name == opt.wrong_shape_tensor) shape[0] += 1;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = tiny_value(s, i);
    const size_t shard = s * static_cast<size_t>(opt.num_shards) / slots.size();
    shards[shard].tensor(name, "F32", shape, to_bytes(v));
    weight_map[name] = fmt::format("model-{:05d}-of-{:05d}.safetensors", shard + 1, opt.num_shards);
    values[name] = std::move(v);
  }
  if (opt.num_shards == 1) {
    shards[0].write(dir + "/model.safetensors");
  } else {
    for (int k = 0; k < opt.num_shards; ++k)
      shards[static_cast<size_t>(k)].write(dir +
                                           fmt::format("/model-{:05d}-of-{:05d}.safetensors", k + 1, opt.num_shards));
    write_text(dir + "/model.safetensors.index.json", nlohmann::json{{"weight_map", weight_map}}.dump(2));
  }
  return values;
}

// A GGUF llama model: metadata from `c`, every tensor F32 except those named in `types` (GGML type id ->
// raw bytes generator supplied by the caller through `raw`).
struct TinyGguf {
  ModelConfig config;
  std::map<std::string, uint32_t> types;                     // tensor name -> GGML type (default F32)
  std::map<std::string, std::vector<uint8_t>> raw;           // tensor name -> raw data for non-F32 tensors
  std::map<std::string, std::vector<float>> f32;             // filled by write(): F32 contents by name
  std::string architecture = "llama";
  std::string skip_tensor;
  std::string wrong_shape_tensor;
  std::function<void(GgufWriter&)> extra;
  std::optional<uint32_t> claimed_layers;  // llama.block_count written instead of config.num_layers (a file that lies)

  void write(const std::string& path) {
    GgufWriter w;
    w.kv_str("general.architecture", architecture);
    w.kv_u32("llama.context_length", static_cast<uint32_t>(config.max_position_embeddings));
    w.kv_u32("llama.embedding_length", static_cast<uint32_t>(config.hidden_size));
    w.kv_u32("llama.feed_forward_length", static_cast<uint32_t>(config.intermediate_size));
    w.kv_u32("llama.block_count", claimed_layers ? *claimed_layers : static_cast<uint32_t>(config.num_layers));
    w.kv_u32("llama.attention.head_count", static_cast<uint32_t>(config.num_heads));
    w.kv_u32("llama.attention.head_count_kv", static_cast<uint32_t>(config.num_kv_heads));
    w.kv_u32("llama.rope.dimension_count", static_cast<uint32_t>(config.head_dim));
    w.kv_f32("llama.rope.freq_base", static_cast<float>(config.rope.theta));
    w.kv_f32("llama.attention.layer_norm_rms_epsilon", static_cast<float>(config.rms_norm_eps));
    w.kv_u32("tokenizer.ggml.bos_token_id", 1);
    w.kv_u32("tokenizer.ggml.eos_token_id", 2);
    if (extra) extra(w);
    ModelWeights mw;
    const auto slots = weight_slots(config, mw);
    for (size_t s = 0; s < slots.size(); ++s) {
      const std::string name = gguf_weight_name(slots[s]);
      if (name == skip_tensor) continue;
      std::vector<uint64_t> shape(slots[s].shape.begin(), slots[s].shape.end());
      if (name == wrong_shape_tensor) shape[0] += 2;
      if (auto it = types.find(name); it != types.end()) {
        w.tensor(name, it->second, shape, raw.at(name));
        continue;
      }
      size_t n = 1;
      for (auto d : shape) n *= d;
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = tiny_value(s, i);
      w.tensor(name, 0, shape, to_bytes(v));
      f32[name] = std::move(v);
    }
    w.write(path);
  }
};

inline ModelConfig tiny_gguf_config() {
  ModelConfig c;
  c.vocab_size = 16;
  c.hidden_size = 8;
  c.intermediate_size = 12;
  c.num_layers = 1;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 4;
  c.max_position_embeddings = 64;
  c.tie_word_embeddings = true;
  return c;
}

}  // namespace pagoda::test
