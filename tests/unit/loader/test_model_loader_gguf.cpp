// load_model on GGUF files: stories260K, Q/K row un-permutation (row mapping and preserved attention
// scores), Q8_0 kept / Q4_0 converted to int4 g32, llama3 rope recovered from rope_freqs, and GGUF model errors.
#include <gtest/gtest.h>

#include <numbers>

#include "pagoda/loader/gguf_file.h"
#include "pagoda/loader/model_loader.h"
#include "pagoda/loader/weight_transforms.h"
#include "tiny_models.h"

namespace pagoda {
namespace {

using test::TempDir;
using test::TinyGguf;

LoadedModel load(const std::string& path) {
  LoadOptions o;
  o.model_path = path;
  o.show_progress = false;
  return load_model(o);
}

const float* row(const Tensor& t, int64_t r) { return t.ptr<const float>() + r * t.shape[1]; }

TEST(LoadGguf, Stories260K) {
  const LoadedModel m = load(test::stories_gguf());
  EXPECT_EQ(m.format, "gguf");
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_DOUBLE_EQ(c.rope.theta, 10000.0);
  EXPECT_EQ(c.rope.type, RopeType::kDefault);
  EXPECT_NEAR(c.rms_norm_eps, 1e-5, 1e-12);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.dtype, DType::kF32);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<TokenId>{2}));

  const GgufFile f(test::stories_gguf());
  for (int layer : {0, 4}) {
    const LayerWeights& l = m.weights.layers[static_cast<size_t>(layer)];
    const auto* q = f.find_tensor(fmt::format("blk.{}.attn_q.weight", layer));
    const auto* k = f.find_tensor(fmt::format("blk.{}.attn_k.weight", layer));
    const auto* v = f.find_tensor(fmt::format("blk.{}.attn_v.weight", layer));
    ASSERT_EQ(l.wq.data.shape_string(), "[64, 64]");
    ASSERT_EQ(l.wk.data.shape_string(), "[32, 64]");
    for (int64_t r = 0; r < 64; ++r)
      EXPECT_EQ(std::memcmp(row(l.wq.data, r), reinterpret_cast<const float*>(q->data) + gguf_rope_row(r, 8) * 64, 256),
                0);
    for (int64_t r = 0; r < 32; ++r)
      EXPECT_EQ(std::memcmp(row(l.wk.data, r), reinterpret_cast<const float*>(k->data) + gguf_rope_row(r, 8) * 64, 256),
                0);
    EXPECT_NE(std::memcmp(l.wq.data.data, q->data, q->nbytes), 0);  // really permuted
    EXPECT_EQ(std::memcmp(l.wv.data.data, v->data, v->nbytes), 0);
  }
  // Everything but Q and K is a view into the mapping.
  EXPECT_EQ(m.owned.size(), 10u);
  EXPECT_EQ(m.weights.lm_head.data.shape_string(), "[512, 64]");
  EXPECT_EQ(std::memcmp(m.weights.lm_head.data.data, f.find_tensor("output.weight")->data, 512 * 64 * 4), 0);
  ASSERT_NE(m.tokenizer, nullptr);
  EXPECT_EQ(m.tokenizer->vocab_size(), 512);
}

TEST(LoadGguf, RopeRowMapping) {
  // head_dim 4: HF rows (j * 2 + i) come from GGUF rows (2 * i + j).
  const std::vector<int64_t> expected = {0, 2, 1, 3, 4, 6, 5, 7};
  for (int64_t r = 0; r < 8; ++r) EXPECT_EQ(gguf_rope_row(r, 4), expected[static_cast<size_t>(r)]) << r;
  EXPECT_EQ(gguf_rope_row(3, 8), 6);   // i = 3, j = 0
  EXPECT_EQ(gguf_rope_row(12, 8), 9);  // i = 0, j = 1... of head 1: 8 + 1
}

TEST(LoadGguf, UnpermutesSyntheticQK) {
  TempDir dir;
  TinyGguf g;
  g.config = test::tiny_gguf_config();  // 2 heads, 1 kv head, head_dim 4, hidden 8
  g.write(dir.file("tiny.gguf"));
  const LoadedModel m = load(dir.file("tiny.gguf"));
  EXPECT_TRUE(m.config.tie_word_embeddings);
  EXPECT_EQ(m.weights.lm_head.data.data, m.weights.embed_tokens.data.data);
  const auto& gq = g.f32.at("blk.0.attn_q.weight");
  const auto& gk = g.f32.at("blk.0.attn_k.weight");
  const std::vector<int> q_rows = {0, 2, 1, 3, 4, 6, 5, 7}, k_rows = {0, 2, 1, 3};
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c)
      EXPECT_EQ(row(m.weights.layers[0].wq.data, r)[c], gq[static_cast<size_t>(q_rows[r] * 8 + c)]);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 8; ++c)
      EXPECT_EQ(row(m.weights.layers[0].wk.data, r)[c], gk[static_cast<size_t>(k_rows[r] * 8 + c)]);
}

// RoPE on one head vector: interleaved pairs (2i, 2i+1) as llama.cpp does, or rotate-half pairs (i, i+hd/2).
std::vector<double> rope(std::vector<double> x, int pos, bool interleaved) {
  const size_t half = x.size() / 2;
  for (size_t i = 0; i < half; ++i) {
    const double a = pos * std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(x.size()));
    const size_t p0 = interleaved ? 2 * i : i, p1 = interleaved ? 2 * i + 1 : i + half;
    const double x0 = x[p0], x1 = x[p1];
    x[p0] = x0 * std::cos(a) - x1 * std::sin(a);
    x[p1] = x0 * std::sin(a) + x1 * std::cos(a);
  }
  return x;
}

std::vector<double> matvec_head(const float* w, int head, int hd, int cols, const std::vector<double>& x) {
  std::vector<double> y(static_cast<size_t>(hd));
  for (int r = 0; r < hd; ++r)
    for (int c = 0; c < cols; ++c)
      y[static_cast<size_t>(r)] += w[(head * hd + r) * cols + c] * x[static_cast<size_t>(c)];
  return y;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST(LoadGguf, UnpermutedWeightsPreserveAttentionScores) {
  const LoadedModel m = load(test::stories_gguf());
  const GgufFile f(test::stories_gguf());
  const int hd = 8, hidden = 64;
  std::vector<double> x(hidden);
  for (int i = 0; i < hidden; ++i) x[static_cast<size_t>(i)] = std::sin(1.3 * i + 0.2);
  const auto* gq = reinterpret_cast<const float*>(f.find_tensor("blk.2.attn_q.weight")->data);
  const auto* gk = reinterpret_cast<const float*>(f.find_tensor("blk.2.attn_k.weight")->data);
  const auto* hq = m.weights.layers[2].wq.data.ptr<const float>();
  const auto* hk = m.weights.layers[2].wk.data.ptr<const float>();
  for (int head = 0; head < 8; ++head) {
    const int kv_head = head / 2;
    for (auto [pq, pk] : {std::pair{5, 2}, std::pair{37, 36}, std::pair{100, 0}}) {
      const double s_gguf = dot(rope(matvec_head(gq, head, hd, hidden, x), pq, true),
                                rope(matvec_head(gk, kv_head, hd, hidden, x), pk, true));
      const double s_hf = dot(rope(matvec_head(hq, head, hd, hidden, x), pq, false),
                              rope(matvec_head(hk, kv_head, hd, hidden, x), pk, false));
      EXPECT_NEAR(s_gguf, s_hf, 1e-9 * (1 + std::abs(s_gguf))) << head;
    }
  }
}

TEST(LoadGguf, Q8ConvertedToInt8ChannelAndQ4ToInt4Group) {
  TempDir dir;
  TinyGguf g;
  g.config = test::tiny_gguf_config();
  g.config.hidden_size = 32;  // quantised blocks run along in_features
  g.config.num_heads = 2;
  g.config.head_dim = 16;
  g.config.intermediate_size = 32;
  // wq: Q8_0, one block per row, scale = row + 1 so rows are told apart.
  std::vector<uint8_t> q8;
  for (int r = 0; r < 32; ++r) {
    const uint16_t d = f32_to_f16(static_cast<float>(r + 1));
    q8.push_back(static_cast<uint8_t>(d & 0xff));
    q8.push_back(static_cast<uint8_t>(d >> 8));
    for (int k = 0; k < 32; ++k) q8.push_back(static_cast<uint8_t>(static_cast<int8_t>(k - r)));
  }
  // wk and wv: Q4_0 [16, 32], scale 0.5, byte k of row r = (k + r) & 15 | (15 - k) << 4.
  std::vector<uint8_t> q4;
  for (int r = 0; r < 16; ++r) {
    const uint16_t d = f32_to_f16(0.5f);
    q4.push_back(static_cast<uint8_t>(d & 0xff));
    q4.push_back(static_cast<uint8_t>(d >> 8));
    for (int k = 0; k < 16; ++k) q4.push_back(static_cast<uint8_t>(((k + r) & 15) | ((15 - k) << 4)));
  }
  auto q4_value = [](int r, int c) { return 0.5f * static_cast<float>((c < 16 ? (c + r) & 15 : 15 - (c - 16)) - 8); };
  g.types = {{"blk.0.attn_q.weight", 8}, {"blk.0.attn_k.weight", 2}, {"blk.0.attn_v.weight", 2}};
  g.raw = {{"blk.0.attn_q.weight", q8}, {"blk.0.attn_k.weight", q4}, {"blk.0.attn_v.weight", q4}};
  g.write(dir.file("q.gguf"));
  const LoadedModel m = load(dir.file("q.gguf"));
  EXPECT_EQ(m.config.dtype, DType::kF16);  // quantised attention weights -> F16 compute dtype
  const LayerWeights& l = m.weights.layers[0];
  // Q8_0 becomes int8 g32, symmetric, with its codes and scale d (exact); Q's rows un-permuted with their scales.
  ASSERT_EQ(l.wq.scheme, QuantScheme::kInt8Channel);
  EXPECT_EQ(l.wq.source_format, "Q8_0");
  EXPECT_EQ(l.wq.group_size, 32);
  EXPECT_EQ(l.wq.data.shape_string(), "[32, 32]");
  EXPECT_TRUE(l.wq.zeros.empty());
  EXPECT_TRUE(l.wq.offsets.empty());
  for (int r = 0; r < 32; ++r) {
    const int src = gguf_rope_row(r, 16);
    EXPECT_EQ(l.wq.scales.ptr<const float>()[r], static_cast<float>(src + 1)) << r;
    for (int k = 0; k < 32; ++k) ASSERT_EQ(l.wq.data.ptr<const int8_t>()[r * 32 + k], k - src) << r << "," << k;
  }
  // Q4_0 becomes int4 g32 with zero point 8 and scale d (exact); K's rows un-permuted with their scales.
  for (const Weight* w : {&l.wk, &l.wv}) {
    ASSERT_EQ(w->scheme, QuantScheme::kInt4Group);
    EXPECT_EQ(w->source_format, "Q4_0");
    EXPECT_EQ(w->group_size, 32);
    EXPECT_EQ(w->cols(), 32);
    EXPECT_EQ(w->data.shape_string(), "[16, 16]");
    EXPECT_EQ(w->scales.shape_string(), "[16, 1]");
    EXPECT_EQ(w->zeros.shape_string(), "[16, 1]");
    EXPECT_TRUE(w->offsets.empty());
  }
  auto value = [](const Weight& w, int r, int c) {
    const int q = (w.data.ptr<const uint8_t>()[r * 16 + c / 2] >> (4 * (c % 2))) & 15;
    return static_cast<float>(q - w.zeros.ptr<const uint8_t>()[r]) * w.scales.ptr<const float>()[r];
  };
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 32; ++c) {
      EXPECT_EQ(value(l.wv, r, c), q4_value(r, c));
      EXPECT_EQ(value(l.wk, r, c), q4_value(static_cast<int>(gguf_rope_row(r, 16)), c));
    }
  }
}

// llama.cpp's per-pair rope divisors for HF llama3 scaling (factor, low 1, high 4, original 8192).
std::vector<float> llama3_freqs(double theta, int hd, double factor) {
  std::vector<float> out;
  for (int i = 0; i < hd / 2; ++i) {
    const double wavelen = 2 * std::numbers::pi * std::pow(theta, 2.0 * i / hd);
    double f;
    if (wavelen < 8192.0 / 4) f = 1;
    else if (wavelen > 8192.0 / 1) f = factor;
    else {
      const double smooth = (8192.0 / wavelen - 1) / (4 - 1);
      f = 1 / ((1 - smooth) / factor + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

TEST(LoadGguf, Llama3RopeFromRopeFreqs) {
  TempDir dir;
  TinyGguf g;
  g.config = test::tiny_gguf_config();
  g.config.hidden_size = 64;
  g.config.num_heads = 1;
  g.config.head_dim = 64;
  g.config.rope.theta = 500000;
  auto freqs = llama3_freqs(500000, 64, 8.0);
  g.extra = [&](test::GgufWriter& w) { w.tensor("rope_freqs.weight", 0, {32}, test::to_bytes(freqs)); };
  g.write(dir.file("l3.gguf"));
  const LoadedModel m = load(dir.file("l3.gguf"));
  EXPECT_EQ(m.config.rope.type, RopeType::kLlama3);
  EXPECT_NEAR(m.config.rope.factor, 8.0, 1e-6);
  EXPECT_EQ(m.config.rope.low_freq_factor, 1.0);
  EXPECT_EQ(m.config.rope.high_freq_factor, 4.0);
  EXPECT_EQ(m.config.rope.original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(m.config.rope.theta, 500000.0);

  freqs[10] += 0.25f;  // not a llama3 table
  g.write(dir.file("odd.gguf"));
  test::expect_load_error([&] { load(dir.file("odd.gguf")); }, {"odd.gguf", "rope_freqs.weight[10]"});
}

TEST(LoadGgufErrors, UnsupportedArchitecture) {
  TempDir dir;
  TinyGguf g;
  g.config = test::tiny_gguf_config();
  g.architecture = "qwen2";
  g.write(dir.file("qwen.gguf"));
  test::expect_load_error([&] { load(dir.file("qwen.gguf")); }, {"qwen.gguf", "unsupported architecture qwen2"});
}

TEST(LoadGgufErrors, MissingAndMisshapenTensors) {
  TempDir dir;
  TinyGguf g;
  g.config = test::tiny_gguf_config();
  g.skip_tensor = "blk.0.ffn_up.weight";
  g.write(dir.file("missing.gguf"));
  test::expect_load_error([&] { load(dir.file("missing.gguf")); },
                          {"missing.gguf", "missing tensor blk.0.ffn_up.weight"});
  TinyGguf g2;
  g2.config = test::tiny_gguf_config();
  g2.wrong_shape_tensor = "blk.0.attn_v.weight";
  g2.write(dir.file("shape.gguf"));
  test::expect_load_error([&] { load(dir.file("shape.gguf")); },
                          {"shape.gguf", "tensor blk.0.attn_v.weight has shape [6, 8], expected [4, 8]"});
}

// Found by fuzz_gguf: a block_count of 2,555,905 in a file of 11 tensors made the loader allocate 7.7 GB
// of per-layer slots before it noticed the first missing tensor.
// Block types hold linear weights; a norm stored as one (a file that lies) is a LoadError naming it.
TEST(LoadGgufErrors, BlockQuantizedNormIsRefused) {
  TempDir dir;
  TinyGguf g;
  g.config = test::tiny_gguf_config();
  g.config.hidden_size = 32;
  g.config.head_dim = 16;
  g.config.intermediate_size = 32;
  g.types = {{"blk.0.attn_norm.weight", 6}};  // Q5_0: one 22-byte block of 32
  g.raw = {{"blk.0.attn_norm.weight", std::vector<uint8_t>(22, 0)}};
  g.write(dir.file("norm.gguf"));
  test::expect_load_error([&] { load(dir.file("norm.gguf")); },
                          {"norm.gguf", "blk.0.attn_norm.weight", "Q5_0", "2-D"});
}

TEST(LoadGgufErrors, MoreLayersThanTheFileHoldsIsRefusedBeforeAllocating) {
  TempDir dir;
  TinyGguf g;
  g.config = test::tiny_gguf_config();
  g.claimed_layers = 2555905;
  g.write(dir.file("layers.gguf"));
  test::expect_load_error([&] { load(dir.file("layers.gguf")); },
                          {"layers.gguf", "the config has 2555905 layers, but the file holds only"});
}

// Found by a corrupted-checkpoint sweep: each of these loaded and generated nothing or garbage.
TEST(LoadGgufErrors, MetadataNoModelCanUse) {
  TempDir dir;
  for (const double eps : {-1.0, 0.0, std::nan(""), 2.0}) {
    TinyGguf g;
    g.config = test::tiny_gguf_config();
    g.config.rms_norm_eps = eps;
    g.write(dir.file("eps.gguf"));
    test::expect_load_error([&] { load(dir.file("eps.gguf")); }, {"eps.gguf", "layer_norm_rms_epsilon", "below 1"});
  }
  TinyGguf theta;
  theta.config = test::tiny_gguf_config();
  theta.config.rope.theta = -10000;
  theta.write(dir.file("theta.gguf"));
  test::expect_load_error([&] { load(dir.file("theta.gguf")); }, {"theta.gguf", "freq_base", "positive"});
  TinyGguf tokens;  // a tokenizer of 3 tokens for an embedding of the config's vocabulary
  tokens.config = test::tiny_gguf_config();
  tokens.extra = [](test::GgufWriter& w) { w.kv_strings("tokenizer.ggml.tokens", {"a", "b", "c"}); };
  tokens.write(dir.file("tokens.gguf"));
  test::expect_load_error([&] { load(dir.file("tokens.gguf")); },
                          {"tokens.gguf", "tokenizer.ggml.tokens holds 3 tokens but token_embd.weight has"});
  TinyGguf fewer;  // block_count edited down: the file's other layers would be ignored
  fewer.config = test::tiny_gguf_config();
  fewer.config.num_layers = 2;
  fewer.claimed_layers = 1;
  fewer.write(dir.file("fewer.gguf"));
  test::expect_load_error([&] { load(dir.file("fewer.gguf")); }, {"fewer.gguf", "beyond the config's"});
}

TEST(LoadGgufErrors, UnsupportedRopeScalingAndMissingMetadata) {
  TempDir dir;
  TinyGguf g;
  g.config = test::tiny_gguf_config();
  g.extra = [](test::GgufWriter& w) { w.kv_str("llama.rope.scaling.type", "yarn"); };
  g.write(dir.file("yarn.gguf"));
  test::expect_load_error([&] { load(dir.file("yarn.gguf")); }, {"yarn.gguf", "rope scaling type yarn"});
  test::GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.write(dir.file("bare.gguf"));
  test::expect_load_error([&] { load(dir.file("bare.gguf")); }, {"bare.gguf", "missing metadata llama."});
}

}  // namespace
}  // namespace pagoda
