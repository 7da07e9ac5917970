// --load-format dummy --quantization KIND: random decoder linears in each kind's internal form, at the shape
// of tinystories-656k (hidden 128, FFN 384, so every K is a multiple of 128): schemes, layouts, determinism
// by seed, the dequantized values' spread, a finite CPU forward, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "../loader/test_files.h"
#include "../model/golden_helpers.h"
#include "pagoda/backend/cpu/linear_quant.h"
#include "pagoda/loader/model_loader.h"

namespace pagoda {
namespace {

using nlohmann::json;
using test::TempDir;

const std::string kTiny = "models/quant/tinystories-656k";  // config.json (float32), tokenizer, weights unused

LoadedModel load_dummy(const std::string& path, const std::string& quantization, uint64_t seed = 0) {
  return load_model(LoadOptions{.model_path = path,
                                .format = LoadFormat::kDummy,
                                .dummy_seed = seed,
                                .show_progress = false,
                                .quantization = quantization});
}

// The decoder linears of every layer, with their [N, K].
std::vector<std::pair<const Weight*, std::pair<int64_t, int64_t>>> linears(const LoadedModel& m) {
  const ModelConfig& c = m.config;
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim, h = c.hidden_size,
                f = c.intermediate_size;
  std::vector<std::pair<const Weight*, std::pair<int64_t, int64_t>>> out;
  for (const LayerWeights& l : m.weights.layers) {
    out.push_back({&l.wq, {q, h}});
    out.push_back({&l.wk, {kv, h}});
    out.push_back({&l.wv, {kv, h}});
    out.push_back({&l.wo, {h, q}});
    out.push_back({&l.w_gate, {f, h}});
    out.push_back({&l.w_up, {f, h}});
    out.push_back({&l.w_down, {h, f}});
  }
  return out;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data, b.data, static_cast<size_t>(a.nbytes())) == 0;
}

struct Kind {
  std::string name;
  QuantScheme scheme;
  DType data_dtype;
  bool zeros;
};

class DummyQuantKind : public ::testing::TestWithParam<Kind> {};

TEST_P(DummyQuantKind, LayoutDeterminismSpreadAndForward) {
  const Kind& kind = GetParam();
  const LoadedModel m = load_dummy(testing::data_path(kTiny), kind.name, 7);
  EXPECT_EQ(m.format, "dummy");
  ASSERT_EQ(m.weights.layers.size(), 2u);
  const auto lin = linears(m);
  for (const auto& [w, nk] : lin) {
    const auto [n, k] = nk;
    EXPECT_EQ(w->scheme, kind.scheme);
    EXPECT_EQ(w->in_features, k);
    EXPECT_EQ(w->source_format, "dummy " + kind.name);
    EXPECT_EQ(w->num_rows(), n);
    EXPECT_EQ(w->cols(), k);
    EXPECT_EQ(w->data.dtype, kind.data_dtype);
    EXPECT_EQ(w->scales.dtype, DType::kF32);
    EXPECT_TRUE(w->offsets.empty());
    EXPECT_TRUE(w->g_idx.empty());
    if (kind.scheme == QuantScheme::kInt4Group) {
      EXPECT_EQ(w->group_size, 128);
      EXPECT_EQ(w->data.shape_string(), fmt::format("[{}, {}]", n, k / 2));
      EXPECT_EQ(w->scales.shape_string(), fmt::format("[{}, {}]", n, k / 128));
      ASSERT_EQ(w->zeros.shape_string(), fmt::format("[{}, {}]", n, k / 128));
      EXPECT_EQ(w->zeros.dtype, DType::kU8);
      const uint8_t* z = w->zeros.ptr<const uint8_t>();
      for (int64_t i = 0; i < w->zeros.numel(); ++i) {
        if (kind.name == "awq") {
          EXPECT_TRUE(z[i] >= 6 && z[i] <= 9) << int{z[i]};
        } else {
          EXPECT_EQ(z[i], 8);
        }
      }
    } else {
      EXPECT_EQ(w->group_size, k);
      EXPECT_EQ(w->data.shape_string(), fmt::format("[{}, {}]", n, k));
      EXPECT_EQ(w->scales.shape_string(), fmt::format("[{}, 1]", n));
      EXPECT_TRUE(w->zeros.empty());
    }
    if (kind.scheme == QuantScheme::kFp8Channel) {
      const uint8_t* codes = w->data.ptr<const uint8_t>();
      for (int64_t i = 0; i < w->data.numel(); ++i) ASSERT_NE(codes[i] & 0x7f, 0x7f) << "NaN code at " << i;
    }
  }
  if (kind.name == "awq") {  // the zero points vary
    const Tensor& z = m.weights.layers[0].w_up.zeros;
    const uint8_t* p = z.ptr<const uint8_t>();
    EXPECT_TRUE(std::any_of(p, p + z.numel(), [&](uint8_t v) { return v != p[0]; }));
  }
  // Embeddings, norms and the (tied) lm_head stay in the config dtype.
  EXPECT_FALSE(m.weights.embed_tokens.quantized());
  EXPECT_EQ(m.weights.embed_tokens.data.dtype, DType::kF32);
  EXPECT_FALSE(m.weights.layers[1].ffn_norm.quantized());
  EXPECT_EQ(m.weights.final_norm.data.dtype, DType::kF32);
  EXPECT_EQ(m.weights.lm_head.data.data, m.weights.embed_tokens.data.data);

  // Same seed -> the same bytes; another seed -> others. The unquantized weights do not depend on the kind.
  const LoadedModel again = load_dummy(testing::data_path(kTiny), kind.name, 7);
  const LoadedModel other = load_dummy(testing::data_path(kTiny), kind.name, 8);
  const LoadedModel plain = load_dummy(testing::data_path(kTiny), "", 7);
  const auto lin_again = linears(again), lin_other = linears(other);
  for (size_t i = 0; i < lin.size(); ++i) {
    EXPECT_TRUE(same_bytes(lin[i].first->data, lin_again[i].first->data)) << i;
    EXPECT_TRUE(same_bytes(lin[i].first->scales, lin_again[i].first->scales)) << i;
    if (kind.zeros) {
      EXPECT_TRUE(same_bytes(lin[i].first->zeros, lin_again[i].first->zeros)) << i;
    }
    EXPECT_FALSE(same_bytes(lin[i].first->data, lin_other[i].first->data)) << i;
    EXPECT_FALSE(same_bytes(lin[i].first->scales, lin_other[i].first->scales)) << i;
  }
  EXPECT_TRUE(same_bytes(m.weights.embed_tokens.data, plain.weights.embed_tokens.data));

  // Dequantized, each linear looks like the unquantized dummy's: mean 0, stddev 0.02.
  for (const auto& [w, nk] : lin) {
    std::vector<float> v(static_cast<size_t>(nk.first * nk.second));
    cpu::dequantize_rows(*w, 0, w->num_rows(), v.data());
    double sum = 0, sq = 0;
    for (float x : v) {
      ASSERT_TRUE(std::isfinite(x));
      sum += x;
      sq += static_cast<double>(x) * x;
    }
    const double mean = sum / static_cast<double>(v.size());
    const double sd = std::sqrt(sq / static_cast<double>(v.size()) - mean * mean);
    EXPECT_GE(sd, 0.01);
    EXPECT_LE(sd, 0.04);
    EXPECT_NEAR(sd, 0.02, 0.001) << "[" << nk.first << ", " << nk.second << "]";
    EXPECT_NEAR(mean, 0.0, 0.001);
  }

  // A CPU forward gives finite logits that are not all the same.
  const std::vector<TokenId> ids = {1, 50, 300, 7, 1999, 42, 8, 1024};
  const std::vector<float> logits = testing::all_position_logits(m, ids, 3);
  ASSERT_EQ(logits.size(), ids.size() * 2048u);
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  const auto [lo, hi] = std::minmax_element(logits.begin(), logits.end());
  EXPECT_GT(*hi - *lo, 1e-3f);
}

INSTANTIATE_TEST_SUITE_P(Kinds, DummyQuantKind,
                         ::testing::Values(Kind{"awq", QuantScheme::kInt4Group, DType::kU8, true},
                                           Kind{"gptq", QuantScheme::kInt4Group, DType::kU8, true},
                                           Kind{"compressed-tensors", QuantScheme::kInt4Group, DType::kU8, true},
                                           Kind{"int8", QuantScheme::kInt8Channel, DType::kI8, false},
                                           Kind{"fp8", QuantScheme::kFp8Channel, DType::kF8E4M3, false},
                                           Kind{"modelopt", QuantScheme::kFp8Channel, DType::kF8E4M3, false}),
                         [](const auto& info) {
                           std::string name = info.param.name;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(DummyQuant, NoneIsTheUnquantizedDummy) {
  const LoadedModel none = load_dummy(testing::data_path(kTiny), "none", 3);
  const LoadedModel plain = load_dummy(testing::data_path(kTiny), "", 3);
  EXPECT_FALSE(none.weights.layers[0].wq.quantized());
  EXPECT_EQ(none.weights.layers[0].wq.data.dtype, DType::kF32);
  EXPECT_TRUE(same_bytes(none.weights.layers[1].w_down.data, plain.weights.layers[1].w_down.data));
}

// quantization_config.group_size in the config.json sets the int4 group size (here 32; -1: one per row);
// the per-channel kinds ignore it.
TEST(DummyQuant, GroupSizeFromConfig) {
  const LoadedModel g32 = load_dummy(testing::data_path("models/quant/awq-w4-g32-gemm"), "gptq");
  const Weight& down = g32.weights.layers[1].w_down;  // [128, 384]
  EXPECT_EQ(down.group_size, 32);
  EXPECT_EQ(down.scales.shape_string(), "[128, 12]");
  EXPECT_EQ(down.zeros.shape_string(), "[128, 12]");
  const LoadedModel int8 = load_dummy(testing::data_path("models/quant/awq-w4-g32-gemm"), "int8");
  EXPECT_EQ(int8.weights.layers[0].wq.scales.shape_string(), "[128, 1]");

  TempDir dir;
  json c = testing::read_json(testing::data_path(kTiny + "/config.json"));
  c["quantization_config"] = {{"group_size", -1}};
  test::write_text(dir.file("config.json"), c.dump());
  const LoadedModel whole = load_dummy(dir.path(), "awq");  // (a reference into the temporary dangled: ASan)
  const Weight& up = whole.weights.layers[0].w_up;          // [384, 128]
  EXPECT_EQ(up.group_size, 128);
  EXPECT_EQ(up.scales.shape_string(), "[384, 1]");
}

// gptq with quantization_config.desc_act: act-order g_idx, G columns to a group, the same for every linear of one K
// (the parts of a fused weight read one input), and the model runs on them (finite logits).
TEST(DummyQuant, ActOrderFromConfig) {
  TempDir dir;
  json c = testing::read_json(testing::data_path(kTiny + "/config.json"));
  c["quantization_config"] = {{"group_size", 32}, {"desc_act", true}};
  test::write_text(dir.file("config.json"), c.dump());
  const LoadedModel m = load_dummy(dir.path(), "gptq");
  const LayerWeights& l = m.weights.layers[1];
  for (const Weight* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
    ASSERT_EQ(w->g_idx.numel(), w->in_features);
    std::vector<int> count(static_cast<size_t>(w->in_features / 32), 0);
    bool natural = true;
    for (int64_t k = 0; k < w->in_features; ++k) {
      const int32_t g = w->g_idx.ptr<const int32_t>()[k];
      ASSERT_TRUE(g >= 0 && g < static_cast<int32_t>(count.size()));
      ++count[g];
      natural = natural && g == k / 32;
    }
    EXPECT_FALSE(natural);
    for (int n : count) EXPECT_EQ(n, 32);
  }
  EXPECT_TRUE(same_bytes(l.wq.g_idx, l.wv.g_idx));
  EXPECT_TRUE(same_bytes(l.w_gate.g_idx, l.w_up.g_idx));
  EXPECT_EQ(l.wq.source_format, "dummy gptq act-order");
  const std::vector<float> logits = testing::all_position_logits(m, {1, 50, 300, 7}, 2);
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  c["quantization_config"] = {{"group_size", 32}};  // desc_act absent: no g_idx
  test::write_text(dir.file("config.json"), c.dump());
  EXPECT_TRUE(load_dummy(dir.path(), "gptq").weights.layers[1].wq.g_idx.empty());
}

TEST(DummyQuant, Errors) {
  // int8 names no checkpoint format: with real weights it is an error that says what to use.
  test::expect_load_error(
      [&] { load_model(LoadOptions{.model_path = testing::data_path(kTiny), .show_progress = false,
                                   .quantization = "int8"}); },
      {"tinystories-656k", "--quantization int8", "--load-format dummy", "compressed-tensors", "gptq"});
  // tiny-llama3-hf's config (without its 128k-token tokenizer, slow to load): hidden 64, not a multiple of
  // 128; the first linear is named.
  TempDir dir;
  test::write_text(dir.file("config.json"),
                   testing::read_json(testing::data_path("models/tiny-llama3-hf/config.json")).dump());
  test::expect_load_error([&] { load_dummy(dir.path(), "awq"); },
                          {dir.path(), "model.layers.0.self_attn.q_proj.weight", "in_features 64", "group size 128"});
  // A group size that does not divide hidden 128 (q_proj's K).
  json c = testing::read_json(testing::data_path(kTiny + "/config.json"));
  c["quantization_config"] = {{"group_size", 256}};
  test::write_text(dir.file("config.json"), c.dump());
  test::expect_load_error([&] { load_dummy(dir.path(), "compressed-tensors"); },
                          {"model.layers.0.self_attn.q_proj.weight", "in_features 128", "group size 256"});
  c["quantization_config"] = {{"group_size", 0}};
  test::write_text(dir.file("config.json"), c.dump());
  test::expect_load_error([&] { load_dummy(dir.path(), "awq"); },
                          {"config.json", "quantization_config.group_size must be -1 or a positive even number"});
  test::expect_load_error([&] { load_dummy(testing::data_path(kTiny), "int3"); },
                          {"unknown --quantization \"int3\"", "int8"});
}

}  // namespace
}  // namespace pagoda
