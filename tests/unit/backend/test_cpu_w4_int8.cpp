// The 4-bit x int8-block CPU product (ActivationQuant::kInt8Block, linear_w4_int8.h) against a double
// reference of its definition: activations rounded to Q8_0 blocks, weights dequantized exactly, products summed.
// Each instruction-set level (AVX2 maddubs, AVX512-VNNI) gives the same bits, for every batch size.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "pagoda/backend/cpu/cpu_isa.h"
#include "pagoda/backend/cpu/linear_quant.h"
#include "pagoda/backend/cpu/linear_w4_int8.h"
#include "random_quant_weight.h"

namespace pagoda {
namespace {

struct Case {
  test::QuantForm form;
  int64_t n, k, group, tokens;
};

class W4Int8Linear : public ::testing::TestWithParam<Case> {};

std::vector<float> random_activations(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(count));
  for (float& v : x) v = dist(rng);
  return x;
}

// x rounded as llama.cpp's Q8_0 blocks: d = amax / 127, values round(x / d) * d.
std::vector<double> q8_values(const std::vector<float>& x, int64_t k) {
  std::vector<double> out(x.size());
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.0f;
    const float inv = d != 0 ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; ++j) out[b * 32 + j] = static_cast<double>(d) * std::lrintf(x[b * 32 + j] * inv);
  }
  return out;
}

TEST_P(W4Int8Linear, MatchesTheQuantizedProductOnEveryLevel) {
  const Case c = GetParam();
  test::RandomQuantWeight rw(c.form, c.n, c.k, c.group, 11);
  Weight w = rw.weight;
  w.activations = ActivationQuant::kInt8Block;
  ASSERT_TRUE(cpu::linear_w4_int8_supported(w));
  const std::vector<float> x = random_activations(c.tokens * c.k, 3);
  std::vector<float> dense(static_cast<size_t>(c.n * c.k));
  cpu::dequantize_rows(w, 0, c.n, dense.data());
  const std::vector<double> xq = q8_values(x, c.k);

  const cpu::Isa saved = cpu::active_isa();
  std::vector<std::vector<float>> per_level;
  for (cpu::Isa isa : {cpu::Isa::kAvx2, cpu::Isa::kAvx512}) {
    if (cpu::set_active_isa(isa) != isa) continue;
    std::vector<float> out(static_cast<size_t>(c.tokens * c.n), NAN);
    cpu::linear_quant_f32(out.data(), x.data(), c.tokens, w);
    for (int64_t t = 0; t < c.tokens; ++t) {
      for (int64_t r = 0; r < c.n; ++r) {
        double ref = 0, mag = 0;
        for (int64_t i = 0; i < c.k; ++i) {
          ref += xq[t * c.k + i] * dense[r * c.k + i];
          mag += std::fabs(xq[t * c.k + i] * dense[r * c.k + i]);
        }
        ASSERT_NEAR(out[t * c.n + r], ref, 2e-6 * mag + 1e-6) << cpu::isa_name(isa) << " token " << t << " row " << r;
      }
    }
    // Batch invariance: tokens one, two and three at a time give the same bits.
    for (int64_t group : {1, 2, 3}) {
      for (int64_t t0 = 0; t0 + group <= c.tokens; t0 += group) {
        std::vector<float> part(static_cast<size_t>(group * c.n));
        cpu::linear_quant_f32(part.data(), x.data() + t0 * c.k, group, w);
        for (int64_t i = 0; i < group * c.n; ++i)
          ASSERT_EQ(part[i], out[t0 * c.n + i]) << cpu::isa_name(isa) << " tokens " << t0 << "+" << group;
      }
    }
    per_level.push_back(out);
  }
  cpu::set_active_isa(saved);
  if (per_level.size() == 2) {
    EXPECT_EQ(per_level[0], per_level[1]) << "AVX2 and AVX512-VNNI differ";
  }
}

INSTANTIATE_TEST_SUITE_P(Forms, W4Int8Linear,
                         ::testing::Values(Case{test::QuantForm::kInt4Zeros, 37, 256, 32, 7},
                                           Case{test::QuantForm::kInt4Offsets, 21, 192, 32, 9},
                                           Case{test::QuantForm::kInt4Zeros, 16, 512, 128, 5},
                                           Case{test::QuantForm::kInt4Offsets, 9, 128, 64, 1},
                                           // an odd number of blocks (7) and of pairs
                                           Case{test::QuantForm::kInt4Zeros, 6, 224, 32, 3},
                                           Case{test::QuantForm::kInt4Offsets, 5, 224, 32, 11}),
                         [](const auto& info) {
                           const bool zeros = info.param.form == test::QuantForm::kInt4Zeros;
                           return std::string(zeros ? "zeros" : "offsets") + "_g" + std::to_string(info.param.group) +
                                  "_t" + std::to_string(info.param.tokens);
                         });

// Where the kernel does not apply (act-order groups, K not a multiple of 32), the fp32 path computes it.
TEST(W4Int8Linear, ShapesItDoesNotTakeFallBackToFp32Inputs) {
  test::RandomQuantWeight rw(test::QuantForm::kInt4Zeros, 8, 48, 16, 2);
  Weight w = rw.weight;
  w.activations = ActivationQuant::kInt8Block;
  EXPECT_FALSE(cpu::linear_w4_int8_supported(w));
  const std::vector<float> x = random_activations(48, 4);
  std::vector<float> dense(8 * 48), out(8), ref(8);
  cpu::dequantize_rows(w, 0, 8, dense.data());
  cpu::linear_quant_f32(out.data(), x.data(), 1, w);
  for (int r = 0; r < 8; ++r) {
    double s = 0;
    for (int i = 0; i < 48; ++i) s += static_cast<double>(x[i]) * dense[r * 48 + i];
    EXPECT_NEAR(out[r], s, 1e-4) << "row " << r;
  }
}

}  // namespace
}  // namespace pagoda
