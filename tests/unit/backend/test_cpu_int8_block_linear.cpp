// The int8-block CPU products (ActivationQuant::kInt8Block: 4-bit weights in linear_w4_int8.h, 8-bit ones in
// linear_w8_int8.h) against a double reference of their definition: activations rounded to Q8_0 blocks,
// weights dequantized exactly, products summed. Each instruction-set level (AVX2 maddubs, AVX512-VNNI) gives
// the same bits, for every batch size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "pagoda/backend/cpu/cpu_isa.h"
#include "pagoda/backend/cpu/linear_quant.h"
#include "pagoda/backend/cpu/linear_w4_int8.h"
#include "pagoda/backend/cpu/linear_w8_int8.h"
#include "random_quant_weight.h"

namespace pagoda {
namespace {

struct Case {
  test::QuantForm form;
  int64_t n, k, group, tokens;
};

class Int8BlockLinear : public ::testing::TestWithParam<Case> {};

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

TEST_P(Int8BlockLinear, MatchesTheQuantizedProductOnEveryLevel) {
  const Case c = GetParam();
  test::RandomQuantWeight rw(c.form, c.n, c.k, c.group, 11);
  Weight w = rw.weight;
  w.activations = ActivationQuant::kInt8Block;
  const bool int4 = w.scheme == QuantScheme::kInt4Group;
  ASSERT_TRUE(int4 ? cpu::linear_w4_int8_supported(w) : cpu::linear_w8_int8_supported(w));
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

INSTANTIATE_TEST_SUITE_P(Forms, Int8BlockLinear,
                         ::testing::Values(Case{test::QuantForm::kInt4Zeros, 37, 256, 32, 7},
                                           Case{test::QuantForm::kInt4Offsets, 21, 192, 32, 9},
                                           Case{test::QuantForm::kInt4Zeros, 16, 512, 128, 5},
                                           Case{test::QuantForm::kInt4Offsets, 9, 128, 64, 1},
                                           // an odd number of blocks (7) and of pairs
                                           Case{test::QuantForm::kInt4Zeros, 6, 224, 32, 3},
                                           Case{test::QuantForm::kInt4Offsets, 5, 224, 32, 11},
                                           // a chunk of 128 columns inside a group of 256; a last chunk of one
                                           // block; a last chunk of one group of 64
                                           Case{test::QuantForm::kInt4Zeros, 10, 512, 256, 6},
                                           Case{test::QuantForm::kInt4Offsets, 7, 160, 32, 5},
                                           Case{test::QuantForm::kInt4Zeros, 5, 320, 64, 4},
                                           // 8-bit: Q6_K's groups of 16 (the full int8 range), Q5_1's offsets,
                                           // per row, a last half chunk
                                           Case{test::QuantForm::kInt8Symmetric, 37, 256, 16, 7},
                                           Case{test::QuantForm::kInt8Offsets, 21, 192, 32, 9},
                                           Case{test::QuantForm::kInt8Symmetric, 9, 224, 224, 5},
                                           Case{test::QuantForm::kInt8Symmetric, 6, 160, 32, 1},
                                           Case{test::QuantForm::kInt8Offsets, 5, 96, 16, 3},
                                           Case{test::QuantForm::kInt8Symmetric, 4, 512, 128, 11},
                                           // GGUF Q8_0's form: groups of 32; rows in 4-row tiles and a tail
                                           Case{test::QuantForm::kInt8Symmetric, 131, 256, 32, 6},
                                           Case{test::QuantForm::kInt8Symmetric, 6, 64, 32, 1}),
                         [](const auto& info) {
                           std::string name = test::quant_form_name(info.param.form);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name + "_g" + std::to_string(info.param.group) +
                                  "_k" + std::to_string(info.param.k) + "_t" + std::to_string(info.param.tokens);
                         });

// Where the kernels do not apply (K not a multiple of 32, groups a lane would straddle, zero points on 8-bit
// codes), the fp32 path computes the product from fp32 inputs.
TEST(Int8BlockLinearShapes, ShapesTheKernelsDoNotTakeFallBackToFp32Inputs) {
  struct Shape {
    test::QuantForm form;
    int64_t k, group;
  };
  for (const Shape& shape : {Shape{test::QuantForm::kInt4Zeros, 48, 16}, Shape{test::QuantForm::kInt4Zeros, 96, 96},
                             Shape{test::QuantForm::kInt8Symmetric, 48, 48}, Shape{test::QuantForm::kInt8Zeros, 64, 32},
                             Shape{test::QuantForm::kInt8Symmetric, 192, 48}}) {
    test::RandomQuantWeight rw(shape.form, 8, shape.k, shape.group, 2);
    Weight w = rw.weight;
    w.activations = ActivationQuant::kInt8Block;
    EXPECT_FALSE(cpu::linear_w4_int8_supported(w) || cpu::linear_w8_int8_supported(w)) << shape.k << " " << shape.group;
    const std::vector<float> x = random_activations(shape.k, 4);
    std::vector<float> dense(static_cast<size_t>(8 * shape.k)), out(8);
    cpu::dequantize_rows(w, 0, 8, dense.data());
    cpu::linear_quant_f32(out.data(), x.data(), 1, w);
    for (int r = 0; r < 8; ++r) {
      double s = 0, mag = 0;
      for (int64_t i = 0; i < shape.k; ++i) {
        s += static_cast<double>(x[i]) * dense[r * shape.k + i];
        mag += std::fabs(static_cast<double>(x[i]) * dense[r * shape.k + i]);
      }
      EXPECT_NEAR(out[r], s, 1e-5 * mag + 1e-6) << "row " << r << " k " << shape.k << " group " << shape.group;
    }
  }
}

}  // namespace
}  // namespace pagoda
