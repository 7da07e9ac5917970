// load_model on HF directories: the bundled tiny checkpoints (shapes, dtypes, values against the raw
// safetensors bytes), sharded checkpoints, and the errors a broken directory must produce.
#include <gtest/gtest.h>

#include "pagoda/loader/model_loader.h"
#include "tiny_models.h"

namespace pagoda {
namespace {

using nlohmann::json;
using test::TempDir;

LoadedModel load(const std::string& path) {
  LoadOptions o;
  o.model_path = path;
  o.show_progress = false;
  return load_model(o);
}

// Raw bytes of tensor `name` in a single-file safetensors checkpoint, read independently of the loader.
std::vector<uint8_t> raw_tensor(const std::string& file, const std::string& name) {
  const auto raw = test::read_bytes(file);
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  const json h = json::parse(raw.begin() + 8, raw.begin() + 8 + static_cast<long>(n));
  const uint64_t b = h[name]["data_offsets"][0], e = h[name]["data_offsets"][1];
  return {raw.begin() + static_cast<long>(8 + n + b), raw.begin() + static_cast<long>(8 + n + e)};
}

bool same_bytes(const Tensor& t, const std::vector<uint8_t>& raw) {
  return static_cast<size_t>(t.nbytes()) == raw.size() && std::memcmp(t.data, raw.data(), raw.size()) == 0;
}

bool inside(const LoadedModel& m, const Tensor& t) {
  for (const auto& map : m.mappings) {
    const auto* p = static_cast<const std::byte*>(t.data);
    if (p >= map->data() && p + t.nbytes() <= map->data() + map->size()) return true;
  }
  return false;
}

void expect_shapes(const LoadedModel& m) {
  const ModelConfig& c = m.config;
  const auto shape = [](const Weight& w) { return w.data.shape_string(); };
  const std::string h = std::to_string(c.hidden_size);
  EXPECT_EQ(shape(m.weights.embed_tokens), fmt::format("[{}, {}]", c.vocab_size, c.hidden_size));
  EXPECT_EQ(shape(m.weights.lm_head), fmt::format("[{}, {}]", c.vocab_size, c.hidden_size));
  EXPECT_EQ(shape(m.weights.final_norm), "[" + h + "]");
  ASSERT_EQ(m.weights.layers.size(), static_cast<size_t>(c.num_layers));
  for (const LayerWeights& l : m.weights.layers) {
    EXPECT_EQ(shape(l.attn_norm), "[" + h + "]");
    EXPECT_EQ(shape(l.ffn_norm), "[" + h + "]");
    EXPECT_EQ(shape(l.wq), fmt::format("[{}, {}]", c.num_heads * c.head_dim, c.hidden_size));
    EXPECT_EQ(shape(l.wk), fmt::format("[{}, {}]", c.num_kv_heads * c.head_dim, c.hidden_size));
    EXPECT_EQ(shape(l.wv), fmt::format("[{}, {}]", c.num_kv_heads * c.head_dim, c.hidden_size));
    EXPECT_EQ(shape(l.wo), fmt::format("[{}, {}]", c.hidden_size, c.num_heads * c.head_dim));
    EXPECT_EQ(shape(l.w_gate), fmt::format("[{}, {}]", c.intermediate_size, c.hidden_size));
    EXPECT_EQ(shape(l.w_up), fmt::format("[{}, {}]", c.intermediate_size, c.hidden_size));
    EXPECT_EQ(shape(l.w_down), fmt::format("[{}, {}]", c.hidden_size, c.intermediate_size));
  }
}

TEST(LoadHf, TinyLlama3) {
  const std::string dir = test::data_dir() + "/models/tiny-llama3-hf";
  const LoadedModel m = load(dir);
  EXPECT_EQ(m.format, "safetensors");
  EXPECT_EQ(m.source, dir);
  EXPECT_EQ(m.config.hidden_size, 64);
  EXPECT_EQ(m.config.num_layers, 2);
  expect_shapes(m);
  EXPECT_EQ(m.weights.embed_tokens.data.dtype, DType::kBF16);
  EXPECT_EQ(m.weights.layers[1].w_down.data.dtype, DType::kBF16);
  EXPECT_EQ(m.weights.lm_head.data.data, m.weights.embed_tokens.data.data);  // tied: the same view
  EXPECT_TRUE(m.owned.empty());                                               // zero-copy
  EXPECT_TRUE(inside(m, m.weights.layers[0].wq.data));
  const std::string file = dir + "/model.safetensors";
  EXPECT_TRUE(same_bytes(m.weights.layers[1].wk.data, raw_tensor(file, "model.layers.1.self_attn.k_proj.weight")));
  EXPECT_TRUE(same_bytes(m.weights.final_norm.data, raw_tensor(file, "model.norm.weight")));
  EXPECT_TRUE(same_bytes(m.weights.embed_tokens.data, raw_tensor(file, "model.embed_tokens.weight")));
  EXPECT_EQ(m.generation.eos_token_ids, (std::vector<TokenId>{128009}));
  ASSERT_NE(m.tokenizer, nullptr);
  EXPECT_EQ(m.tokenizer->vocab_size(), 128256);
}

// RoPE frequencies stay float32 unless the checkpoint dtype is asked for (tests/unit/model/test_rope_params.cpp
// checks the rounding itself).
TEST(LoadHf, RopeFrequenciesAreFloat32UnlessTheCheckpointDtypeIsAsked) {
  const std::string dir = test::data_dir() + "/models/tiny-llama3-hf";
  EXPECT_EQ(load(dir).config.rope.inv_freq_dtype, DType::kF32);
  const LoadedModel ckpt = load_model(
      LoadOptions{.model_path = dir, .show_progress = false, .rope_freq_dtype = RopeFreqDtype::kCheckpoint});
  EXPECT_EQ(ckpt.config.rope.inv_freq_dtype, DType::kBF16);
}

TEST(LoadHf, TinyMistralSpmUntied) {
  const std::string dir = test::data_dir() + "/models/tiny-mistral-spm-hf";
  const LoadedModel m = load(dir);
  expect_shapes(m);
  EXPECT_NE(m.weights.lm_head.data.data, m.weights.embed_tokens.data.data);
  const std::string file = dir + "/model.safetensors";
  EXPECT_TRUE(same_bytes(m.weights.lm_head.data, raw_tensor(file, "lm_head.weight")));
  EXPECT_TRUE(same_bytes(m.weights.layers[2].w_gate.data, raw_tensor(file, "model.layers.2.mlp.gate_proj.weight")));
  EXPECT_TRUE(
      same_bytes(m.weights.layers[0].attn_norm.data, raw_tensor(file, "model.layers.0.input_layernorm.weight")));
  // A few decoded values, as a reader of the weights would see them.
  const auto raw = raw_tensor(file, "model.layers.2.self_attn.o_proj.weight");
  const auto* bf = m.weights.layers[2].wo.data.ptr<const uint16_t>();
  for (size_t i : {size_t{0}, size_t{17}, raw.size() / 2 - 1}) {
    uint16_t v;
    std::memcpy(&v, raw.data() + 2 * i, 2);
    EXPECT_EQ(bf16_to_f32(bf[i]), bf16_to_f32(v));
  }
  ASSERT_NE(m.tokenizer, nullptr);
  EXPECT_EQ(m.tokenizer->vocab_size(), 32000);
}

TEST(LoadHf, NoTokenizerJsonGivesNullTokenizer) {
  TempDir dir;
  test::write_tiny_hf_model(dir.path(), test::tiny_config_json());
  const LoadedModel m = load(dir.path());
  EXPECT_EQ(m.tokenizer, nullptr);
  EXPECT_EQ(m.config.bos_token_id, 1);
}

TEST(LoadHf, ShardedCheckpoint) {
  TempDir dir;
  const auto values = test::write_tiny_hf_model(dir.path(), test::tiny_config_json(), test::sharded(3));
  const LoadedModel m = load(dir.path());
  EXPECT_EQ(m.mappings.size(), 3u);
  expect_shapes(m);
  EXPECT_EQ(m.weights.embed_tokens.data.dtype, DType::kF32);
  const auto& down = values.at("model.layers.1.mlp.down_proj.weight");
  EXPECT_EQ(std::memcmp(m.weights.layers[1].w_down.data.data, down.data(), down.size() * 4), 0);
  const auto& head = values.at("lm_head.weight");
  EXPECT_EQ(std::memcmp(m.weights.lm_head.data.data, head.data(), head.size() * 4), 0);
}

TEST(LoadHf, MisalignedTensorsAreCopied) {
  TempDir dir;
  const auto values = test::write_tiny_hf_model(dir.path(), test::tiny_config_json());
  // Grow the header by one space: every tensor now starts at an odd address.
  auto bytes = test::read_bytes(dir.file("model.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  bytes.insert(bytes.begin() + static_cast<long>(8 + n), ' ');
  ++n;
  std::memcpy(bytes.data(), &n, 8);
  test::write_bytes(dir.file("model.safetensors"), bytes);
  const LoadedModel m = load(dir.path());
  EXPECT_EQ(m.owned.size(), 1u + 2 * 9 + 1 + 1);  // every weight
  const Tensor& wq = m.weights.layers[1].wq.data;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(wq.data) % 4, 0u);
  const auto& expected = values.at("model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(std::memcmp(wq.data, expected.data(), expected.size() * 4), 0);
}

TEST(LoadHfErrors, MissingTensor) {
  TempDir dir;
  test::write_tiny_hf_model(dir.path(), test::tiny_config_json(),
                            test::skipping("model.layers.1.self_attn.v_proj.weight"));
  test::expect_load_error([&] { load(dir.path()); },
                          {"model.safetensors", "missing tensor model.layers.1.self_attn.v_proj.weight"});
  // Untied config without lm_head.weight.
  TempDir dir2;
  test::write_tiny_hf_model(dir2.path(), test::tiny_config_json(), test::skipping("lm_head.weight"));
  test::expect_load_error([&] { load(dir2.path()); }, {"missing tensor lm_head.weight"});
}

TEST(LoadHfErrors, WrongShapeVsConfig) {
  TempDir dir;
  test::write_tiny_hf_model(dir.path(), test::tiny_config_json(),
                            test::misshaping("model.layers.0.mlp.up_proj.weight"));
  test::expect_load_error(
      [&] { load(dir.path()); },
      {"model.safetensors", "tensor model.layers.0.mlp.up_proj.weight has shape [13, 8], expected [12, 8]"});
}

TEST(LoadHfErrors, MissingShard) {
  TempDir dir;
  test::write_tiny_hf_model(dir.path(), test::tiny_config_json(), test::sharded(2));
  std::filesystem::remove(dir.file("model-00002-of-00002.safetensors"));
  test::expect_load_error([&] { load(dir.path()); }, {"model-00002-of-00002.safetensors", "missing shard"});
}

TEST(LoadHfErrors, UnsupportedArchitecture) {
  TempDir dir;
  json c = test::tiny_config_json();
  c["architectures"] = {"GPT2LMHeadModel"};
  test::write_tiny_hf_model(dir.path(), c);
  test::expect_load_error([&] { load(dir.path()); }, {"config.json", "unsupported architecture GPT2LMHeadModel"});
}

TEST(LoadHfErrors, BadPaths) {
  TempDir dir;
  test::expect_load_error([&] { load(dir.path()); }, {dir.path(), "no config.json"});
  test::expect_load_error([&] { load(dir.file("nope")); }, {"nope", "no such file"});
  test::write_text(dir.file("notes.txt"), "hello");
  test::expect_load_error([&] { load(dir.file("notes.txt")); }, {"notes.txt", "not a model"});
  test::write_text(dir.file("config.json"), test::tiny_config_json().dump());
  test::expect_load_error([&] { load(dir.path()); }, {dir.path(), "no model.safetensors"});
}

}  // namespace
}  // namespace pagoda
