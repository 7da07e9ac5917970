// parse_hf_config / parse_generation_config against the bundled configs (transformers 4 and 5 forms)
// and against malformed or unsupported configs written by the test.
#include "pagoda/loader/hf_config.h"

#include <gtest/gtest.h>

#include "test_files.h"

namespace pagoda {
namespace {

using nlohmann::json;
using test::TempDir;

std::string model_dir(const std::string& name) { return test::data_dir() + "/models/" + name; }

TEST(HfConfig, TransformersV5TinyLlama3) {
  const ModelConfig c = parse_hf_config(model_dir("tiny-llama3-hf") + "/config.json");
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.rope.type, RopeType::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope.theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rope.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 512);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<TokenId>{128009}));
}

TEST(HfConfig, TransformersV4Llama3_8B) {
  const ModelConfig c = parse_hf_config(model_dir("llama-3-8b") + "/config.json");
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);  // hidden / heads: no head_dim in this config
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.rope.type, RopeType::kDefault);  // rope_scaling: null
  EXPECT_DOUBLE_EQ(c.rope.theta, 500000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<TokenId>{128009}));
  EXPECT_EQ(c.num_parameters(), 8030261248);  // the published Llama-3-8B count
}

TEST(HfConfig, Llama32EosListAndRopeScaling) {
  const ModelConfig c = parse_hf_config(model_dir("llama-3.2-1b") + "/config.json");
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.intermediate_size, 8192);
  EXPECT_EQ(c.num_layers, 16);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.rope.type, RopeType::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope.theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rope.factor, 32.0);
  EXPECT_DOUBLE_EQ(c.rope.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 8192);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<TokenId>{128001, 128008, 128009}));
  EXPECT_EQ(c.num_parameters(), 1235814400);  // Llama-3.2-1B
}

TEST(HfConfig, TinyMistralSpm) {
  const ModelConfig c = parse_hf_config(model_dir("tiny-mistral-spm-hf") + "/config.json");
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.hidden_size, 96);
  EXPECT_EQ(c.intermediate_size, 256);
  EXPECT_EQ(c.num_layers, 3);
  EXPECT_EQ(c.num_heads, 6);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope.type, RopeType::kDefault);
  EXPECT_DOUBLE_EQ(c.rope.theta, 10000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<TokenId>{2}));
}

json minimal_config() {
  return json{{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", 100},
              {"hidden_size", 32}, {"intermediate_size", 64}, {"num_hidden_layers", 1},
              {"num_attention_heads", 4}, {"max_position_embeddings", 128}};
}

ModelConfig parse(const TempDir& dir, const json& j) {
  test::write_text(dir.file("config.json"), j.dump());
  return parse_hf_config(dir.file("config.json"));
}

TEST(HfConfig, DefaultsAndAlternativeSpellings) {
  TempDir dir;
  ModelConfig c = parse(dir, minimal_config());
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rope.theta, 10000.0);
  EXPECT_EQ(c.rope.type, RopeType::kDefault);
  EXPECT_FALSE(c.bos_token_id.has_value());
  EXPECT_TRUE(c.eos_token_ids.empty());

  json j = minimal_config();
  j["rope_scaling"] = {{"type", "llama3"}, {"factor", 4.0}, {"low_freq_factor", 2.0}, {"high_freq_factor", 8.0},
                       {"original_max_position_embeddings", 64}};
  j["torch_dtype"] = "float16";
  j["head_dim"] = nullptr;
  c = parse(dir, j);
  EXPECT_EQ(c.rope.type, RopeType::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope.factor, 4.0);
  EXPECT_DOUBLE_EQ(c.rope.low_freq_factor, 2.0);
  EXPECT_DOUBLE_EQ(c.rope.high_freq_factor, 8.0);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 64);
  EXPECT_EQ(c.dtype, DType::kF16);
  EXPECT_EQ(c.head_dim, 8);

  j = minimal_config();
  j["architectures"] = {"MistralForCausalLM"};
  j["model_type"] = "mistral";
  j["sliding_window"] = nullptr;
  j["dtype"] = "float32";
  c = parse(dir, j);
  EXPECT_EQ(c.dtype, DType::kF32);
  EXPECT_EQ(c.max_position_embeddings, 128);

  // Mistral v0.1's sliding window: no sliding-window attention, so the context is capped at the window.
  j["sliding_window"] = 64;
  c = parse(dir, j);
  EXPECT_EQ(c.max_position_embeddings, 64);
}

TEST(HfConfigErrors, UnsupportedArchitecture) {
  TempDir dir;
  json j = minimal_config();
  j["architectures"] = {"Qwen2ForCausalLM"};
  test::expect_load_error([&] { parse(dir, j); }, {"config.json", "unsupported architecture Qwen2ForCausalLM"});
  j = minimal_config();
  j.erase("architectures");
  j["model_type"] = "gemma";
  test::expect_load_error([&] { parse(dir, j); }, {"config.json", "unsupported architecture gemma"});
}

TEST(HfConfigErrors, UnsupportedRopeType) {
  TempDir dir;
  json j = minimal_config();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  test::expect_load_error([&] { parse(dir, j); }, {"config.json", "rope type yarn is not supported"});
  j = minimal_config();
  j["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 10000.0}, {"factor", 2.0}};
  test::expect_load_error([&] { parse(dir, j); }, {"config.json", "rope type linear"});
}

TEST(HfConfigErrors, MissingAndMistypedFields) {
  TempDir dir;
  json j = minimal_config();
  j.erase("hidden_size");
  test::expect_load_error([&] { parse(dir, j); }, {"config.json", "hidden_size is missing"});
  j = minimal_config();
  j["num_hidden_layers"] = "two";
  test::expect_load_error([&] { parse(dir, j); }, {"config.json", "num_hidden_layers must be an integer"});
  j = minimal_config();
  j["num_key_value_heads"] = 3;
  test::expect_load_error([&] { parse(dir, j); }, {"config.json", "not a multiple"});
  test::write_text(dir.file("config.json"), "{\"vocab_size\": 12,");
  test::expect_load_error([&] { parse_hf_config(dir.file("config.json")); }, {"config.json", "bad JSON"});
  test::expect_load_error([&] { parse_hf_config(dir.file("absent.json")); }, {"absent.json", "cannot open"});
}

// Found by a corrupted-checkpoint sweep: values in range for their type but not for the model loaded and gave empty
// outputs (rms_norm_eps 1e308, a llama3 rope factor of 1e-300), or failed only at request time (bos_token_id 5000
// with a vocabulary of 2048).
TEST(HfConfigErrors, ValuesNoModelCanUse) {
  TempDir dir;
  const json llama3 = {{"rope_type", "llama3"}, {"factor", 1e-300}, {"low_freq_factor", 1}, {"high_freq_factor", 4},
                       {"original_max_position_embeddings", 64}};
  const struct {
    const char* field;
    json value;
    std::vector<std::string> expect;
  } cases[] = {
      {"rms_norm_eps", 1e308, {"rms_norm_eps", "below 1"}},
      {"rope_theta", 0, {"rope_theta", "positive"}},
      {"rope_scaling", llama3, {"factor", ">= 1"}},
      {"bos_token_id", 100, {"bos_token_id", "outside the vocabulary (100)"}},  // the vocabulary is 100
      {"eos_token_id", json::array({1, 5000}), {"eos_token_id", "5000"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.field);
    json j = minimal_config();
    j[c.field] = c.value;
    std::vector<std::string> expect = c.expect;
    expect.insert(expect.begin(), "config.json");
    test::expect_load_error([&] { parse(dir, j); }, expect);
  }
}

TEST(GenerationConfig, Fields) {
  GenerationDefaults g = parse_generation_config(model_dir("llama-3-8b") + "/generation_config.json");
  EXPECT_EQ(g.temperature, 0.6);
  EXPECT_EQ(g.top_p, 0.9);
  EXPECT_FALSE(g.top_k.has_value());
  EXPECT_FALSE(g.min_p.has_value());
  EXPECT_EQ(g.eos_token_ids, (std::vector<TokenId>{128001, 128009}));

  g = parse_generation_config(model_dir("tiny-llama3-hf") + "/generation_config.json");
  EXPECT_FALSE(g.temperature.has_value());
  EXPECT_EQ(g.eos_token_ids, (std::vector<TokenId>{128009}));

  TempDir dir;
  g = parse_generation_config(dir.file("generation_config.json"));  // missing -> all unset
  EXPECT_FALSE(g.temperature.has_value());
  EXPECT_TRUE(g.eos_token_ids.empty());

  test::write_text(dir.file("g.json"),
                   R"({"top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1, "temperature": 1})");
  g = parse_generation_config(dir.file("g.json"));
  EXPECT_EQ(g.top_k, 40);
  EXPECT_EQ(g.min_p, 0.05);
  EXPECT_EQ(g.repetition_penalty, 1.1);
  EXPECT_EQ(g.temperature, 1.0);

  test::write_text(dir.file("bad.json"), "{oops");
  test::expect_load_error([&] { parse_generation_config(dir.file("bad.json")); }, {"bad.json", "bad JSON"});
}

}  // namespace
}  // namespace pagoda
