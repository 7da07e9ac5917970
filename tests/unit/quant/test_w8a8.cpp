// FP8 W8A8 on the CPU reference: which checkpoints quantize their linears' inputs (compressed-tensors'
// input_activations, fp8's activation_scheme, ModelOpt's quant_algo) and with what scale, the per-token
// quantization itself (every value on the e4m3 grid of its token's scale, within half a step, the largest
// exact, saturation under a static scale), and what it costs ct-fp8-dynamic's logits against weight-only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <tuple>

#include "../model/golden_helpers.h"
#include "editable_checkpoint.h"
#include "pagoda/backend/cpu/linear_quant.h"
#include "pagoda/core/dtype.h"
#include "pagoda/core/error.h"
#include "pagoda/engine/llm.h"
#include "pagoda/loader/model_loader.h"
#include "pagoda/quantize/quantize_weights.h"

namespace pagoda {
namespace {

using test::EditableCheckpoint;
using test::TempDir;

LoadedModel load(const std::string& path, bool quantize_activations = true) {
  return load_model(LoadOptions{.model_path = path, .show_progress = false, .quantize_activations = quantize_activations});
}

std::string ct_fp8() { return test::data_dir() + "/models/quant/ct-fp8-dynamic"; }

void expect_every_linear(const LoadedModel& m, ActivationQuant a, float input_scale) {
  for (const LayerWeights& l : m.weights.layers)
    for (const Weight* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      EXPECT_EQ(w->activations, a);
      EXPECT_EQ(w->input_scale, input_scale);
    }
  EXPECT_EQ(m.weights.lm_head.activations, ActivationQuant::kNone);  // ignored: stays unquantized
}

TEST(QuantW8A8, CheckpointsSayHowInputsAreQuantized) {
  expect_every_linear(load(ct_fp8()), ActivationQuant::kFp8PerToken, 0.0f);
  expect_every_linear(load(ct_fp8(), false), ActivationQuant::kNone, 0.0f);  // --activation-quantization none

  EditableCheckpoint c("ct-fp8-dynamic");
  std::vector<std::string> linears;
  for (const auto& [name, e] : c.tensors)
    if (name.ends_with(".weight_scale")) linears.push_back(name.substr(0, name.size() - 13));
  auto& acts = c.config["quantization_config"]["config_groups"]["group_0"]["input_activations"];
  acts["dynamic"] = false;
  acts["strategy"] = "tensor";
  {
    TempDir dir;
    try {
      load(c.write(dir));
      ADD_FAILURE() << "a static scheme without input_scale loaded";
    } catch (const LoadError& e) {
      EXPECT_NE(std::string(e.what()).find("input_scale"), std::string::npos) << e.what();
    }
  }
  const float s = 0.03125f;
  std::vector<uint8_t> bytes(4);
  std::memcpy(bytes.data(), &s, 4);
  for (const std::string& l : linears) c.tensors[l + ".input_scale"] = {"F32", {1}, bytes};
  {
    TempDir dir;
    expect_every_linear(load(c.write(dir)), ActivationQuant::kFp8Static, s);
  }
  {  // q, k and v (and gate and up) read one input: they quantize it with the largest of their scales
    const float larger = 0.0625f;
    std::vector<uint8_t> b(4);
    std::memcpy(b.data(), &larger, 4);
    EditableCheckpoint d = c;
    d.tensors["model.layers.0.self_attn.k_proj.input_scale"] = {"F32", {1}, b};
    d.tensors["model.layers.1.mlp.up_proj.input_scale"] = {"F32", {1}, b};
    TempDir dir;
    const LoadedModel m = load(d.write(dir));
    const LayerWeights& l0 = m.weights.layers[0];
    const LayerWeights& l1 = m.weights.layers[1];
    for (const Weight* w : {&l0.wq, &l0.wk, &l0.wv, &l1.w_gate, &l1.w_up}) EXPECT_EQ(w->input_scale, larger);
    for (const Weight* w : {&l0.wo, &l0.w_gate, &l0.w_up, &l0.w_down, &l1.wq, &l1.w_down}) EXPECT_EQ(w->input_scale, s);
  }
  acts["strategy"] = "group";
  acts["dynamic"] = true;
  {
    TempDir dir;
    EXPECT_THROW(load(c.write(dir)), LoadError);
  }
  acts = nullptr;  // weight-only FP8 (W8A16)
  {
    TempDir dir;
    expect_every_linear(load(c.write(dir)), ActivationQuant::kNone, 0.0f);
  }
}

TEST(QuantW8A8, PerTokenValuesAreTheNearestE4m3OfTheirTokensScale) {
  const int64_t T = 4, K = 333;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(T * K), q(T * K);
  for (float& v : x) v = normal(rng);
  for (int64_t c = 0; c < K; ++c) x[1 * K + c] *= 1000.0f;  // a row of large values
  for (int64_t c = 0; c < K; ++c) x[2 * K + c] = 0.0f;     // an all-zero row
  cpu::quantize_activations_fp8(x.data(), T, K, ActivationQuant::kFp8PerToken, 0.0f, q.data());
  for (int64_t t = 0; t < T; ++t) {
    float amax = 0.0f;
    for (int64_t c = 0; c < K; ++c) amax = std::max(amax, std::fabs(x[t * K + c]));
    const float s = std::max(amax / 448.0f, cpu::kMinFp8ActivationScale);
    for (int64_t c = 0; c < K; ++c) {
      const float v = x[t * K + c], got = q[t * K + c];
      EXPECT_EQ(f8e4m3_to_f32(f32_to_e4m3_saturating(got * (1.0f / s))) * s, got) << "not on the grid of s";
      // Half a step of 3 mantissa bits (2^-4 relative), or of the subnormal spacing 2^-9 s.
      EXPECT_LE(std::fabs(got - v), std::max(std::fabs(v) / 16.0f, std::ldexp(s, -10)) * 1.0001f) << t << " " << c;
      if (std::fabs(v) == amax && amax > 0) {
        EXPECT_NEAR(got, v, 1e-6f * amax) << "the largest value is 448 s";
      }
    }
  }
  // A static scale: values past 448 s saturate.
  const float big[4] = {0.4f, 1.0f, 10.0f, -1e4f};
  float out[4];
  cpu::quantize_activations_fp8(big, 1, 4, ActivationQuant::kFp8Static, 0.01f, out);
  EXPECT_FLOAT_EQ(out[0], 0.4f);    // 40: an e4m3 value
  EXPECT_FLOAT_EQ(out[1], 0.96f);   // 100, halfway between 96 and 104: to the even mantissa
  EXPECT_FLOAT_EQ(out[2], 4.48f);   // 1000 saturates at 448
  EXPECT_FLOAT_EQ(out[3], -4.48f);
}

TEST(QuantW8A8, LogitsStayCloseToWeightOnly) {
  const std::vector<TokenId> ids = {1, 403, 1139, 289, 13, 600, 21, 77, 1200, 5};
  const LoadedModel w8a8 = load(ct_fp8()), w8a16 = load(ct_fp8(), false);
  const int64_t vocab = w8a8.config.vocab_size;
  const std::vector<float> a = testing::all_position_logits(w8a8, ids, 7), b = testing::all_position_logits(w8a16, ids, 7);
  double worst = 0;
  int same_top1 = 0;
  for (size_t p = 0; p < ids.size(); ++p) {
    const float* ra = a.data() + p * vocab;
    const float* rb = b.data() + p * vocab;
    const auto [lo, hi] = std::minmax_element(rb, rb + vocab);
    double err = 0;
    for (int64_t v = 0; v < vocab; ++v) err = std::max(err, static_cast<double>(std::fabs(ra[v] - rb[v])));
    worst = std::max(worst, err / (*hi - *lo));
    same_top1 += std::max_element(ra, ra + vocab) - ra == hi - rb;
  }
  std::printf("[ measured ] W8A8 against weight-only: worst |logit diff| / range %.4f, top-1 equal at %d of %zu\n",
              worst, same_top1, ids.size());
  EXPECT_GT(worst, 0.0) << "the inputs were not quantized";
  EXPECT_LT(worst, 0.05);
  EXPECT_GE(same_top1, static_cast<int>(ids.size()) - 1);
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

// The worst |logit difference| / the position's logit range of `a` against `b` over ids' positions.
double worst_logit_error(const LoadedModel& a, const LoadedModel& b, const std::vector<TokenId>& ids) {
  const std::vector<float> x = testing::all_position_logits(a, ids, 7), y = testing::all_position_logits(b, ids, 7);
  const int64_t vocab = b.config.vocab_size;
  double worst = 0;
  for (size_t p = 0; p < ids.size(); ++p) {
    const auto [lo, hi] = std::minmax_element(y.begin() + p * vocab, y.begin() + (p + 1) * vocab);
    double err = 0;
    for (int64_t v = 0; v < vocab; ++v) err = std::max(err, static_cast<double>(std::fabs(x[p * vocab + v] - y[p * vocab + v])));
    worst = std::max(worst, err / (*hi - *lo));
  }
  return worst;
}

TEST(QuantLmHead, Fp8LmHeadIsRowScaledRtnWithPerTokenInputs) {
  const std::string dir = test::data_dir() + "/models/quant/tinystories-656k";
  const LoadedModel plain = load_model(LoadOptions{.model_path = dir, .show_progress = false});
  LoadedModel fp8 = load_model(LoadOptions{.model_path = dir, .show_progress = false});
  ASSERT_TRUE(quantizer::quantize_lm_head(fp8.weights, quantizer::WeightQuantization::kFp8, fp8.owned));
  const Weight& src = plain.weights.lm_head;
  const Weight& w = fp8.weights.lm_head;
  ASSERT_EQ(w.scheme, QuantScheme::kFp8Channel);
  EXPECT_EQ(w.activations, ActivationQuant::kFp8PerToken);
  EXPECT_FALSE(fp8.weights.embed_tokens.quantized()) << "the tied embedding table stays as stored";
  const int64_t n = src.data.dim(0), k = src.data.dim(1);
  ASSERT_EQ(w.num_rows(), n);
  ASSERT_EQ(w.cols(), k);
  ASSERT_EQ(src.data.dtype, DType::kF32);
  for (int64_t r = 0; r < n; r += 97) {
    const float* row = src.data.ptr<const float>() + r * k;
    float amax = 0.0f;
    for (int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(row[c]));
    const float s = w.scales.ptr<const float>()[r];
    EXPECT_EQ(s, amax / 448.0f) << "row " << r;
    for (int64_t c = 0; c < k; ++c)
      ASSERT_EQ(w.data.ptr<const uint8_t>()[r * k + c], f32_to_e4m3_saturating(row[c] / s)) << r << " " << c;
  }
  const double worst = worst_logit_error(fp8, plain, {1, 403, 1139, 289, 13, 600, 21, 77});
  std::printf("[ measured ] FP8 lm_head against fp32: worst |logit diff| / range %.4f\n", worst);
  EXPECT_GT(worst, 0.0);
  EXPECT_LT(worst, 0.05);
}

// int8 (per row, symmetric) and w4 (groups of 128 with zero points): every value within half a step of the
// stored one (w4: up to 15 steps' worth of its fp16 scale's rounding, 2^-11 s each, more at a clamped end), and the
// logits close to fp32's (w4's step is 17x int8's, so its bound is looser).
TEST(QuantLmHead, Int8AndW4LmHeadsAreRoundToNearestOfTheStoredRows) {
  const std::string dir = test::data_dir() + "/models/quant/tinystories-656k";
  const LoadedModel plain = load_model(LoadOptions{.model_path = dir, .show_progress = false});
  const Weight& src = plain.weights.lm_head;
  const int64_t n = src.data.dim(0), k = src.data.dim(1);
  ASSERT_EQ(src.data.dtype, DType::kF32);
  for (const auto& [q, scheme, group, steps, bound] :
       {std::tuple{quantizer::WeightQuantization::kInt8, QuantScheme::kInt8Channel, k, 0.5f * (1.0f + 1e-3f), 0.01},
        std::tuple{quantizer::WeightQuantization::kW4, QuantScheme::kInt4Group, int64_t{128}, 0.5f + 16.0f / 2048.0f, 0.1}}) {
    SCOPED_TRACE(std::string(quantizer::weight_quantization_name(q)));
    LoadedModel m = load_model(LoadOptions{.model_path = dir, .show_progress = false});
    ASSERT_TRUE(quantizer::quantize_lm_head(m.weights, q, m.owned));
    const Weight& w = m.weights.lm_head;
    ASSERT_EQ(w.scheme, scheme);
    EXPECT_EQ(w.group_size, group);
    EXPECT_EQ(w.activations, ActivationQuant::kNone) << "weight-only: the inputs stay unquantized";
    EXPECT_FALSE(m.weights.embed_tokens.quantized()) << "the tied embedding table stays as stored";
    ASSERT_EQ(w.num_rows(), n);
    ASSERT_EQ(w.cols(), k);
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = 0; r < n; r += 31) {
      cpu::dequantize_rows(w, r, 1, row.data());
      for (int64_t c = 0; c < k; ++c) {
        const float s = w.scales.ptr<const float>()[r * w.scales.dim(1) + c / group];
        ASSERT_LE(std::fabs(row[c] - src.data.ptr<const float>()[r * k + c]), steps * s + 1e-7f)
            << "row " << r << " column " << c;
      }
    }
    EXPECT_FALSE(quantizer::quantize_lm_head(m.weights, q, m.owned)) << "an lm_head already quantized is kept";
    const double worst = worst_logit_error(m, plain, {1, 403, 1139, 289, 13, 600, 21, 77});
    std::printf("[ measured ] %s lm_head against fp32: worst |logit diff| / range %.4f\n",
                std::string(quantizer::weight_quantization_name(q)).c_str(), worst);
    EXPECT_GT(worst, 0.0);
    EXPECT_LT(worst, bound);
  }
}

// The engine takes the option: LlmOptions::lm_head_quantization reaches the served weights (each form's scheme, as
// `pagoda inspect` names it) and changes what the model computes; an already quantized lm_head is kept, a name it
// does not know is refused.
TEST(QuantLmHead, LlmServesTheQuantizedOutputProjection) {
  const std::string dir = test::data_dir() + "/models/quant/tinystories-656k";
  const auto llm_options = [&](const std::string& lm_head) {
    LlmOptions o;
    o.load = LoadOptions{.model_path = dir, .show_progress = false};
    o.max_num_seqs = 4;
    o.lm_head_quantization = lm_head;
    return o;
  };
  GenerateRequest request;
  request.prompt_ids = {1, 403, 1139, 289, 13};
  request.params.temperature = 0;
  request.params.ignore_eos = true;
  request.params.max_tokens = 4;
  request.params.logprobs = 1;
  LLM plain(llm_options(""));
  const CompletionOutput base = plain.generate({request})[0];
  ASSERT_EQ(base.logprobs.size(), 4u);
  for (const auto& [name, scheme] : {std::pair{"fp8", QuantScheme::kFp8Channel}, std::pair{"int8", QuantScheme::kInt8Channel},
                                      std::pair{"w4", QuantScheme::kInt4Group}}) {
    SCOPED_TRACE(name);
    LLM served(llm_options(name));
    const Weight& head = served.model().weights.lm_head;
    EXPECT_EQ(head.scheme, scheme);
    EXPECT_EQ(head.source_format, std::string(name) + " (--quantize-lm-head)");
    const CompletionOutput out = served.generate({request})[0];
    ASSERT_EQ(out.logprobs.size(), base.logprobs.size());
    double differs = 0;
    for (size_t t = 0; t < out.logprobs.size(); ++t)
      differs = std::max(differs, static_cast<double>(std::fabs(out.logprobs[t][0].logprob - base.logprobs[t][0].logprob)));
    EXPECT_GT(differs, 0.0) << "the outputs are the unquantized model's";
  }
  EXPECT_THROW(LLM(llm_options("nf4")), Error);
}

// The shapes a form cannot take are refused with the option's name: w4 needs in_features a multiple of its group of
// 128 (a 64-wide model's lm_head), and an already quantized lm_head is left as it is.
TEST(QuantLmHead, RefusesWhatTheFormCannotHold) {
  std::vector<HostTensor> owned;
  ModelWeights w;
  w.lm_head.data = owned.emplace_back(DType::kF32, std::initializer_list<int64_t>{32, 64}).view();
  try {
    quantizer::quantize_lm_head(w, quantizer::WeightQuantization::kW4, owned);
    ADD_FAILURE() << "a 64-column lm_head took the w4 form";
  } catch (const InvalidRequest& e) {
    EXPECT_NE(std::string(e.what()).find("--quantize-lm-head w4"), std::string::npos) << e.what();
  }
  ASSERT_TRUE(quantizer::quantize_lm_head(w, quantizer::WeightQuantization::kInt8, owned));
  const Weight int8_head = w.lm_head;
  EXPECT_FALSE(quantizer::quantize_lm_head(w, quantizer::WeightQuantization::kFp8, owned));
  EXPECT_EQ(w.lm_head.data.data, int8_head.data.data);
}

}  // namespace
}  // namespace pagoda
