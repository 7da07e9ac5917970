// LoadFormat::kDummy: random weights of a config's shapes and dtype, deterministic per seed.
#include <gtest/gtest.h>

#include "pagoda/loader/model_loader.h"
#include "tiny_models.h"

namespace pagoda {
namespace {

using test::TempDir;

LoadedModel load_dummy(const std::string& path, uint64_t seed) {
  LoadOptions o;
  o.model_path = path;
  o.format = LoadFormat::kDummy;
  o.dummy_seed = seed;
  o.show_progress = false;
  return load_model(o);
}

float value(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::kF32: return t.ptr<const float>()[i];
    case DType::kF16: return f16_to_f32(t.ptr<const uint16_t>()[i]);
    case DType::kBF16: return bf16_to_f32(t.ptr<const uint16_t>()[i]);
    default: return NAN;
  }
}

TEST(DummyLoad, HfConfigShapesDtypeAndStatistics) {
  TempDir dir;
  nlohmann::json c = test::tiny_config_json();
  c["hidden_size"] = 256;
  c["intermediate_size"] = 512;
  c["vocab_size"] = 1000;
  c["num_attention_heads"] = 4;
  c["num_key_value_heads"] = 2;
  c["torch_dtype"] = "bfloat16";
  c["tie_word_embeddings"] = true;
  test::write_text(dir.file("config.json"), c.dump());
  const LoadedModel m = load_dummy(dir.path(), 7);
  EXPECT_EQ(m.format, "dummy");
  EXPECT_EQ(m.tokenizer, nullptr);
  EXPECT_EQ(m.weights.layers.size(), 2u);
  EXPECT_EQ(m.weights.layers[1].wk.data.shape_string(), "[128, 256]");
  EXPECT_EQ(m.weights.layers[1].w_down.data.shape_string(), "[256, 512]");
  EXPECT_EQ(m.weights.embed_tokens.data.shape_string(), "[1000, 256]");
  EXPECT_EQ(m.weights.lm_head.data.data, m.weights.embed_tokens.data.data);
  EXPECT_EQ(m.weights.layers[0].wq.data.dtype, DType::kBF16);
  EXPECT_EQ(m.weights.final_norm.data.dtype, DType::kBF16);
  for (int64_t i = 0; i < 256; ++i) EXPECT_EQ(value(m.weights.layers[1].ffn_norm.data, i), 1.0f);
  const Tensor& w = m.weights.layers[0].w_up.data;
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    sum += value(w, i);
    sq += value(w, i) * value(w, i);
  }
  const double mean = sum / static_cast<double>(w.numel());
  const double sd = std::sqrt(sq / static_cast<double>(w.numel()) - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.001);
  EXPECT_NEAR(sd, 0.02, 0.001);

  // Same seed -> same weights; another seed -> different weights.
  const LoadedModel again = load_dummy(dir.path(), 7);
  const LoadedModel other = load_dummy(dir.path(), 8);
  const Tensor& e = m.weights.embed_tokens.data;
  EXPECT_EQ(std::memcmp(e.data, again.weights.embed_tokens.data.data, static_cast<size_t>(e.nbytes())), 0);
  EXPECT_NE(std::memcmp(e.data, other.weights.embed_tokens.data.data, static_cast<size_t>(e.nbytes())), 0);
}

TEST(DummyLoad, FromGgufMetadata) {
  const LoadedModel m = load_dummy(test::stories_gguf(), 0);
  EXPECT_EQ(m.config.hidden_size, 64);
  EXPECT_EQ(m.weights.layers.size(), 5u);
  EXPECT_EQ(m.weights.layers[0].wq.data.dtype, DType::kF32);
  EXPECT_EQ(m.weights.lm_head.data.shape_string(), "[512, 64]");
  EXPECT_NE(m.weights.lm_head.data.data, m.weights.embed_tokens.data.data);
  EXPECT_TRUE(m.mappings.empty());
  EXPECT_NE(m.tokenizer, nullptr);
}

TEST(DummyLoad, TokenizerFromDirectory) {
  const LoadedModel m = load_dummy(test::data_dir() + "/models/tiny-llama3-hf", 1);
  EXPECT_EQ(m.weights.embed_tokens.data.shape_string(), "[128256, 64]");
  EXPECT_EQ(m.weights.embed_tokens.data.dtype, DType::kBF16);
  ASSERT_NE(m.tokenizer, nullptr);
}

TEST(DummyLoad, Errors) {
  TempDir dir;
  test::expect_load_error([&] { load_dummy(dir.path(), 0); }, {dir.path(), "no config.json"});
  nlohmann::json c = test::tiny_config_json();
  c["model_type"] = "falcon";
  c.erase("architectures");
  test::write_text(dir.file("config.json"), c.dump());
  test::expect_load_error([&] { load_dummy(dir.path(), 0); }, {"config.json", "unsupported architecture falcon"});
}

}  // namespace
}  // namespace pagoda
