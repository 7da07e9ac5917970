// AutoAWQ's modules_to_not_convert: a linear whose name contains one of its entries is stored unquantized, as a
// float `.weight` (AutoAWQ leaves such modules as nn.Linear; vLLM's is_layer_skipped_awq and the loader match by
// substring). The fixture is the awq-w4-g128-gemm reference with model.layers.1.mlp.down_proj replaced by its own
// dequantized weights in F32 and named in modules_to_not_convert: the same model, so its logits must equal the
// unmodified checkpoint's (and transformers' logits of the dequantized weights, refs/quant_refs_part1.json).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "../model/golden_helpers.h"
#include "editable_checkpoint.h"
#include "pagoda/loader/model_loader.h"
#include "tiny_linear_checkpoint.h"

namespace pagoda {
namespace {

using test::EditableCheckpoint;
using test::TempDir;

const std::string kVariant = "awq-w4-g128-gemm";
const std::string kDown = "model.layers.1.mlp.down_proj";

LoadedModel load(const std::string& path) { return load_model(LoadOptions{.model_path = path, .show_progress = false}); }

// The reference checkpoint with kDown stored as float `values` [128, 384]; modules_to_not_convert set to `skip`.
EditableCheckpoint with_float_down_proj(const std::vector<float>& values, const nlohmann::ordered_json& skip) {
  EditableCheckpoint c(kVariant);
  for (const char* suffix : {".qweight", ".qzeros", ".scales"}) c.tensors.erase(kDown + suffix);
  c.tensors[kDown + ".weight"] = {"F32", {128, 384}, test::to_bytes(values)};
  c.config["quantization_config"]["modules_to_not_convert"] = skip;
  return c;
}

TEST(AwqModulesToNotConvert, FloatLinearBesideQuantizedOnesGivesTheSameModel) {
  const LoadedModel original = load(test::data_dir() + "/models/quant/" + kVariant);
  const std::vector<float> down = test::dequantize_all(original.weights.layers[1].w_down);
  ASSERT_EQ(down.size(), 128u * 384u);

  TempDir dir;
  const LoadedModel m = load(with_float_down_proj(down, {"layers.1.mlp.down_proj"}).write(dir));
  const Weight& w = m.weights.layers[1].w_down;
  ASSERT_FALSE(w.quantized());
  EXPECT_EQ(w.data.dtype, DType::kF32);
  EXPECT_EQ(w.data.shape_string(), "[128, 384]");
  EXPECT_TRUE(std::equal(down.begin(), down.end(), w.data.ptr<float>()));
  EXPECT_TRUE(w.source_format.empty());
  int quantized = 0;  // the 13 other linears are still AWQ
  for (const LayerWeights& l : m.weights.layers)
    for (const Weight* lin : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      if (lin->quantized()) {
        ++quantized;
        EXPECT_EQ(lin->scheme, QuantScheme::kInt4Group);
        EXPECT_EQ(lin->source_format, "awq gemm g128");
      }
  EXPECT_EQ(quantized, 13);

  // The same weights: the logits of every position equal the unmodified checkpoint's (measured: bit for bit, as the
  // CPU's int4 linear dequantizes rows into the float linear's micro-kernel; the bound allows another summation
  // order), and transformers' of the dequantized weights.
  const nlohmann::json refs = testing::read_json(testing::data_path("refs/quant_refs_part1.json"));
  const nlohmann::json& gens = refs["models"][kVariant]["generations"];
  const int64_t vocab = m.config.vocab_size;
  double max_diff = 0;
  for (size_t g = 0; g < 2; ++g) {
    const auto ids = gens[g]["prompt_ids"].get<std::vector<TokenId>>();
    const std::vector<float> got = testing::all_position_logits(m, ids, 5);
    const std::vector<float> want = testing::all_position_logits(original, ids, 5);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      max_diff = std::max(max_diff, std::abs(static_cast<double>(got[i]) - want[i]));
      ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << "prompt " << g << ", logit " << i;
    }
    for (size_t p = 0; p < ids.size(); ++p)
      testing::expect_matches_reference_top8(got.data() + p * vocab, vocab, gens[g], p, 1e-4);
  }
  std::printf("[ measured ] max |logit - the AWQ checkpoint's| = %.3g\n", max_diff);
}

// The float weight is the one the model computes with: with layer 1's down_proj halved, the model equals its dense
// twin (every other linear replaced by its dequantized AWQ weights, no quantization_config) and no longer the AWQ
// checkpoint.
TEST(AwqModulesToNotConvert, TheFloatWeightIsTheOneUsed) {
  const LoadedModel original = load(test::data_dir() + "/models/quant/" + kVariant);
  std::vector<float> half = test::dequantize_all(original.weights.layers[1].w_down);
  for (float& v : half) v *= 0.5f;
  TempDir dir, dense_dir;
  const LoadedModel m = load(with_float_down_proj(half, {"layers.1.mlp.down_proj"}).write(dir));

  EditableCheckpoint dense(kVariant);
  dense.config.erase("quantization_config");
  const char* names[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                         "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
  for (size_t l = 0; l < 2; ++l) {
    const LayerWeights& lw = original.weights.layers[l];
    const Weight* linears[] = {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down};
    for (size_t i = 0; i < 7; ++i) {
      const std::string module = fmt::format("model.layers.{}.{}", l, names[i]);
      for (const char* suffix : {".qweight", ".qzeros", ".scales"}) dense.tensors.erase(module + suffix);
      const std::vector<float> values = module == kDown ? half : test::dequantize_all(*linears[i]);
      dense.tensors[module + ".weight"] = {"F32", {linears[i]->num_rows(), linears[i]->cols()}, test::to_bytes(values)};
    }
  }
  const LoadedModel twin = load(dense.write(dense_dir));
  ASSERT_FALSE(twin.weights.layers[0].wq.quantized());

  const std::vector<TokenId> ids = {1, 403, 1139, 289, 13, 70, 612, 1093, 4, 250, 17, 901};
  const std::vector<float> got = testing::all_position_logits(m, ids, 5);
  const std::vector<float> want = testing::all_position_logits(twin, ids, 5);
  const std::vector<float> awq = testing::all_position_logits(original, ids, 5);
  double from_awq = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << "logit " << i;
    from_awq = std::max(from_awq, std::abs(static_cast<double>(got[i]) - awq[i]));
  }
  EXPECT_GT(from_awq, 0.1) << "halving a down_proj must change the model";
}

// Without the module in modules_to_not_convert, its float weight is not read and its AWQ tensors are missing; with
// it, a module still stored quantized is missing its float weight. Either way a LoadError names the tensor.
TEST(AwqModulesToNotConvert, TheListDecidesWhichTensorsAreRead) {
  const std::vector<float> zeros(128 * 384, 0.0f);
  {
    TempDir dir;
    const std::string path = with_float_down_proj(zeros, nullptr).write(dir);
    test::expect_load_error([&] { load(path); }, {"missing tensor " + kDown + ".qweight"});
  }
  {
    EditableCheckpoint c(kVariant);
    c.config["quantization_config"]["modules_to_not_convert"] = {"layers.1.mlp.down_proj"};
    TempDir dir;
    const std::string path = c.write(dir);
    test::expect_load_error([&] { load(path); }, {"missing tensor " + kDown + ".weight"});
  }
}

}  // namespace
}  // namespace pagoda
