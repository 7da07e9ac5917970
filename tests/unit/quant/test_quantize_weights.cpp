// Weights quantized in memory at start-up (quantize/quantize_weights.h, --fallback-quantization) against the
// checkpoints the independent packer wrote for the same model (tests/data/models/quant/): every linear's codes,
// scales and zero points equal what loading that checkpoint gives, byte for byte; the embedding, norms and
// lm_head are the source's own views; weights it cannot quantize are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "../model/golden_helpers.h"
#include "pagoda/backend/cpu/linear_quant.h"
#include "pagoda/core/dtype.h"
#include "pagoda/core/error.h"
#include "pagoda/loader/model_loader.h"
#include "pagoda/quantize/quantize_weights.h"
#include "pagoda/quantize/rtn.h"

namespace pagoda {
namespace {

using quantizer::WeightQuantization;

LoadedModel load(const std::string& name) {
  return load_model(LoadOptions{.model_path = testing::data_path("models/quant/" + name), .show_progress = false});
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.empty() || b.empty()) return a.empty() == b.empty();
  return a.dtype == b.dtype && a.nbytes() == b.nbytes() && std::memcmp(a.data, b.data, static_cast<size_t>(a.nbytes())) == 0;
}

void expect_same_weight(const Weight& mine, const Weight& ref, const std::string& what) {
  EXPECT_EQ(mine.scheme, ref.scheme) << what;
  EXPECT_EQ(mine.cols(), ref.cols()) << what;
  EXPECT_EQ(mine.num_rows(), ref.num_rows()) << what;
  EXPECT_EQ(mine.activations, ref.activations) << what;
  EXPECT_TRUE(same_bytes(mine.data, ref.data)) << what << " codes";
  EXPECT_TRUE(same_bytes(mine.scales, ref.scales)) << what << " scales";
  EXPECT_TRUE(same_bytes(mine.zeros, ref.zeros)) << what << " zeros";
  EXPECT_TRUE(mine.offsets.empty() && mine.g_idx.empty()) << what;
}

struct Case {
  WeightQuantization q;
  const char* checkpoint;
};

class QuantizeWeights : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizeWeights, EqualTheIndependentPackersCheckpoint) {
  const LoadedModel source = load("tinystories-656k");
  const LoadedModel ref = load(GetParam().checkpoint);
  std::vector<HostTensor> owned;
  const ModelWeights w = quantizer::quantize_decoder_linears(source.weights, GetParam().q, owned);
  ASSERT_EQ(w.layers.size(), ref.weights.layers.size());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& a = w.layers[l];
    const LayerWeights& b = ref.weights.layers[l];
    const std::pair<const Weight*, const Weight*> pairs[] = {{&a.wq, &b.wq}, {&a.wk, &b.wk},         {&a.wv, &b.wv},
                                                             {&a.wo, &b.wo}, {&a.w_gate, &b.w_gate}, {&a.w_up, &b.w_up},
                                                             {&a.w_down, &b.w_down}};
    for (size_t i = 0; i < std::size(pairs); ++i)
      expect_same_weight(*pairs[i].first, *pairs[i].second, fmt::format("layer {} linear {}", l, i));
    // Not quantized: the source's own tensors.
    EXPECT_EQ(a.attn_norm.data.data, source.weights.layers[l].attn_norm.data.data);
    EXPECT_EQ(a.ffn_norm.data.data, source.weights.layers[l].ffn_norm.data.data);
  }
  EXPECT_EQ(w.embed_tokens.data.data, source.weights.embed_tokens.data.data);
  EXPECT_EQ(w.lm_head.data.data, source.weights.lm_head.data.data);
  EXPECT_FALSE(w.lm_head.quantized());
  // The source is left as it was.
  EXPECT_FALSE(source.weights.layers[0].wq.quantized());
}

INSTANTIATE_TEST_SUITE_P(Forms, QuantizeWeights,
                         ::testing::Values(Case{WeightQuantization::kFp8, "ct-fp8-dynamic"},
                                           Case{WeightQuantization::kInt8, "ct-w8a16-channel"},
                                           Case{WeightQuantization::kW4, "awq-w4-g128-gemm"}),
                         [](const auto& info) { return std::string(quantizer::weight_quantization_name(info.param.q)); });

// The class, not the example: F16 and BF16 sources (the reference checkpoint is F32), a row count that leaves a
// partial slab (100 rows, slabs of 64), wide value ranges per row. Each form's scales follow their definition
// in the source dtype, and every value the CPU backend dequantizes lies within that form's rounding of the source.
TEST(QuantizeWeights, EveryFormStaysWithinItsRoundingForF16AndBf16Sources) {
  const int64_t n = 100, k = 256;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    HostTensor t(dtype, {n, k});
    std::vector<float> w(static_cast<size_t>(n * k));
    std::mt19937 rng(5);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) {
        const float v = dist(rng) * std::ldexp(1.0f, static_cast<int>(r % 13) - 6);  // rows 2^-6 .. 2^6
        const uint16_t h = dtype == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
        t.ptr<uint16_t>()[r * k + c] = h;
        w[static_cast<size_t>(r * k + c)] = dtype == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
    ModelWeights src;
    src.layers.resize(1);
    for (Weight* l : {&src.layers[0].wq, &src.layers[0].wk, &src.layers[0].wv, &src.layers[0].wo,
                      &src.layers[0].w_gate, &src.layers[0].w_up, &src.layers[0].w_down})
      l->data = t.view();
    for (WeightQuantization q : {WeightQuantization::kFp8, WeightQuantization::kInt8, WeightQuantization::kW4}) {
      std::vector<HostTensor> owned;
      const Weight got = quantizer::quantize_decoder_linears(src, q, owned).layers[0].w_down;
      std::vector<float> deq(static_cast<size_t>(n * k));
      cpu::dequantize_rows(got, 0, n, deq.data());
      const int64_t group = q == WeightQuantization::kW4 ? 128 : k;
      for (int64_t r = 0; r < n; ++r)
        for (int64_t g0 = 0; g0 < k; g0 += group) {
          float amax = 0, mx = -INFINITY, mn = INFINITY;
          for (int64_t c = g0; c < g0 + group; ++c) {
            const float v = w[static_cast<size_t>(r * k + c)];
            amax = std::max(amax, std::fabs(v)), mx = std::max(mx, v), mn = std::min(mn, v);
          }
          const float s = got.scales.ptr<float>()[r * got.scales.dim(1) + g0 / group];
          float bound = 0;
          if (q == WeightQuantization::kFp8) {
            ASSERT_EQ(s, quantizer::round_to_dtype(amax / 448.0f, dtype)) << "row " << r;
          } else if (q == WeightQuantization::kInt8) {
            ASSERT_EQ(s, quantizer::round_to_dtype(amax / 127.5f, dtype)) << "row " << r;
            bound = s;  // half a step, or a whole one where 127.5 steps clamp to 127
          } else {
            ASSERT_NEAR(s, (mx - mn) / 15.0f, (mx - mn) / 15.0f * 1e-3f) << "row " << r;  // fp16-rounded
            bound = 1.01f * s;  // half a step, and the zero point's rounding
          }
          for (int64_t c = g0; c < g0 + group; ++c) {
            const float v = w[static_cast<size_t>(r * k + c)], d = deq[static_cast<size_t>(r * k + c)];
            // fp8: e4m3 keeps 3 mantissa bits (half a step 2^-4 of the value), 2^-10 of the scale below 2^-6.
            const float b = q == WeightQuantization::kFp8 ? std::fabs(v) * 0.0625f + s * 0.001f : bound;
            ASSERT_LE(std::fabs(d - v), b) << quantizer::weight_quantization_name(q) << " " << dtype_name(dtype)
                                           << " row " << r << " col " << c;
          }
        }
    }
  }
}

TEST(QuantizeWeights, RefusesWeightsItCannotQuantize) {
  const LoadedModel awq = load("awq-w4-g128-gemm");
  std::vector<HostTensor> owned;
  try {
    quantizer::quantize_decoder_linears(awq.weights, WeightQuantization::kFp8, owned);
    ADD_FAILURE() << "quantized an already quantized model";
  } catch (const InvalidRequest& e) {
    EXPECT_NE(std::string(e.what()).find("layer 0 q_proj"), std::string::npos) << e.what();
  }
  // w4 groups of 128 need in_features a multiple of 128: a [4, 96] linear is refused by name.
  ModelWeights odd;
  odd.layers.resize(1);
  HostTensor t(DType::kF32, {4, 96});
  for (Weight* w : {&odd.layers[0].wq, &odd.layers[0].wk, &odd.layers[0].wv, &odd.layers[0].wo, &odd.layers[0].w_gate,
                    &odd.layers[0].w_up, &odd.layers[0].w_down})
    w->data = t.view();
  try {
    quantizer::quantize_decoder_linears(odd, WeightQuantization::kW4, owned);
    ADD_FAILURE() << "w4 of in_features 96";
  } catch (const InvalidRequest& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 128"), std::string::npos) << e.what();
  }
  // fp8 and int8 have no such constraint.
  EXPECT_NO_THROW(quantizer::quantize_decoder_linears(odd, WeightQuantization::kFp8, owned));
  EXPECT_EQ(quantizer::parse_weight_quantization("int8"), WeightQuantization::kInt8);
  EXPECT_FALSE(quantizer::parse_weight_quantization("awq").has_value());
}

}  // namespace
}  // namespace pagoda
