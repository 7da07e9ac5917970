// The int8-block CPU products (ActivationQuant::kInt8Block and kInt8SuperBlock: 4-bit weights in linear_w4_int8.h,
// 8-bit ones in linear_w8_int8.h) against a double reference of their definition: activations rounded as llama.cpp
// rounds them for the weight's type (Q8_0, Q8_1 with offsets, Q8_K for the k-quants; written out here from ggml's
// quantize_row_q8_0 / q8_1 (AVX2) and quantize_row_q8_K_ref), weights dequantized exactly, products summed. Each
// instruction-set level (AVX2 maddubs, AVX512-VNNI) gives the same bits, for every batch size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "pagoda/backend/cpu/cpu_isa.h"
#include "pagoda/backend/cpu/linear_quant.h"
#include "pagoda/backend/cpu/linear_w4_int8.h"
#include "pagoda/backend/cpu/linear_w8_int8.h"
#include "pagoda/core/dtype.h"
#include "random_quant_weight.h"

namespace pagoda {
namespace {

struct Case {
  test::QuantForm form;
  int64_t n, k, group, tokens;
  ActivationQuant activations = ActivationQuant::kInt8Block;
};

class Int8BlockLinear : public ::testing::TestWithParam<Case> {};

std::vector<float> random_activations(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(count));
  for (float& v : x) v = dist(rng);
  return x;
}

float fp16(float f) { return f16_to_f32(f32_to_f16(f)); }

// x as llama.cpp quantizes it, per block of 32: its values v, their scale d, and (Q8_1) the fp16 d * sum(v).
struct LlamaQ8 {
  std::vector<int> v;
  std::vector<float> d, s;  // per block of 32
};
LlamaQ8 llama_q8(const std::vector<float>& x, bool superblocks, bool q8_1) {
  LlamaQ8 q{std::vector<int>(x.size()), std::vector<float>(x.size() / 32), std::vector<float>(x.size() / 32)};
  if (superblocks) {  // Q8_K: iscale = -127 / (the first value of the largest magnitude), d = 1 / iscale
    for (size_t b = 0; b < x.size() / 256; ++b) {
      float amax = 0, max = 0;
      for (size_t j = 0; j < 256; ++j)
        if (std::fabs(x[b * 256 + j]) > amax) {
          amax = std::fabs(x[b * 256 + j]);
          max = x[b * 256 + j];
        }
      const float iscale = amax != 0 ? -127.0f / max : 0.0f;
      for (size_t j = 0; j < 256; ++j)
        q.v[b * 256 + j] = std::min(127, static_cast<int>(std::nearbyint(iscale * x[b * 256 + j])));
      for (size_t j = 0; j < 8; ++j) q.d[b * 8 + j] = amax != 0 ? 1.0f / iscale : 0.0f;
    }
    return q;
  }
  for (size_t b = 0; b < x.size() / 32; ++b) {  // Q8_0: d = amax / 127 in fp16, values x * (127 / amax) rounded
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.0f, id = amax != 0 ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (size_t j = 0; j < 32; ++j) sum += q.v[b * 32 + j] = static_cast<int>(std::nearbyint(x[b * 32 + j] * id));
    q.d[b] = fp16(d);
    q.s[b] = q8_1 ? fp16(d * static_cast<float>(sum)) : 0.0f;
  }
  return q;
}

TEST_P(Int8BlockLinear, MatchesTheQuantizedProductOnEveryLevel) {
  const Case c = GetParam();
  test::RandomQuantWeight rw(c.form, c.n, c.k, c.group, 11);
  Weight w = rw.weight;
  w.activations = c.activations;
  const bool int4 = w.scheme == QuantScheme::kInt4Group;
  ASSERT_TRUE(int4 ? cpu::linear_w4_int8_supported(w) : cpu::linear_w8_int8_supported(w));
  const std::vector<float> x = random_activations(c.tokens * c.k, 3);
  std::vector<float> dense(static_cast<size_t>(c.n * c.k));
  cpu::dequantize_rows(w, 0, c.n, dense.data());
  // Q8_1 where llama.cpp's Q4_1 / Q5_1 have it: offsets of whole blocks of 32 (int8_lanes.h's q8_rule)
  const bool q8_1 = !w.offsets.empty() && c.activations == ActivationQuant::kInt8Block && c.group % 32 == 0;
  const LlamaQ8 q = llama_q8(x, c.activations == ActivationQuant::kInt8SuperBlock, q8_1);
  // The reference: sum(value * v * d) over the inputs; with Q8_1 an offset m multiplies the block's fp16 d * sum(v)
  // instead of d * sum(v): ref += m * (d * sum(v) - s) per block.
  auto reference = [&](int64_t t, int64_t r, double& mag) {
    double ref = 0;
    mag = 0;
    for (int64_t i = 0; i < c.k; ++i) {
      const double xq = static_cast<double>(q.d[(t * c.k + i) / 32]) * q.v[t * c.k + i];
      ref += xq * dense[r * c.k + i];
      mag += std::fabs(xq * dense[r * c.k + i]);
    }
    if (q8_1) {
      for (int64_t b = 0; b < c.k / 32; ++b) {
        const int64_t block = (t * c.k) / 32 + b;
        double sum = 0;
        for (int j = 0; j < 32; ++j) sum += q.v[block * 32 + j];
        const double m = w.offsets.ptr<float>()[r * w.offsets.dim(1) + (b * 32) / c.group];
        ref += m * (static_cast<double>(q.d[block]) * sum - q.s[block]);
        mag += std::fabs(m * q.s[block]);
      }
    }
    return ref;
  };

  const cpu::Isa saved = cpu::active_isa();
  std::vector<std::vector<float>> per_level;
  for (cpu::Isa isa : {cpu::Isa::kAvx2, cpu::Isa::kAvx512}) {
    if (cpu::set_active_isa(isa) != isa) continue;
    std::vector<float> out(static_cast<size_t>(c.tokens * c.n), NAN);
    cpu::linear_quant_f32(out.data(), x.data(), c.tokens, w);
    for (int64_t t = 0; t < c.tokens; ++t) {
      for (int64_t r = 0; r < c.n; ++r) {
        double mag = 0;
        const double ref = reference(t, r, mag);
        ASSERT_NEAR(out[t * c.n + r], ref, 2e-6 * mag + 1e-6) << cpu::isa_name(isa) << " token " << t << " row " << r;
      }
    }
    // Batch invariance: tokens one to four at a time (the streamed loops' tiles) give the same bits.
    for (int64_t group : {1, 2, 3, 4}) {
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
                                           Case{test::QuantForm::kInt8Symmetric, 6, 64, 32, 1},
                                           // the k-quants' Q8_K inputs: Q4_K (offsets, groups of 32), Q5_K,
                                           // Q6_K (groups of 16), two super-blocks a chunk row and one
                                           Case{test::QuantForm::kInt4Offsets, 21, 512, 32, 7, ActivationQuant::kInt8SuperBlock},
                                           Case{test::QuantForm::kInt4Offsets, 6, 256, 32, 1, ActivationQuant::kInt8SuperBlock},
                                           Case{test::QuantForm::kInt8Offsets, 19, 512, 32, 5, ActivationQuant::kInt8SuperBlock},
                                           Case{test::QuantForm::kInt8Symmetric, 37, 256, 16, 9, ActivationQuant::kInt8SuperBlock},
                                           Case{test::QuantForm::kInt8Symmetric, 5, 768, 16, 2, ActivationQuant::kInt8SuperBlock}),
                         [](const auto& info) {
                           std::string name = test::quant_form_name(info.param.form);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name + "_g" + std::to_string(info.param.group) + "_k" + std::to_string(info.param.k) +
                                  "_t" + std::to_string(info.param.tokens) +
                                  (info.param.activations == ActivationQuant::kInt8SuperBlock ? "_q8k" : "");
                         });

// The activations' rounding, value by value and exactly: a weight whose row r picks column r (W8: code 1; W4:
// code z + 1), scale 1, gives out[t, r] = d * v of x[t, r], which must be llama.cpp's on every level and through
// both the streamed (few tokens) and the prepared (many tokens) paths: Q8_0 (d = amax / 127 in fp16, values
// x * (127 / amax) rounded, ties to even) and Q8_K (iscale = -127 / the first value of the largest magnitude,
// d = 1 / iscale). The inputs are the class that separates rounding rules: exact ties of both signs, values just
// off a tie, a zero block, amax in the block's last place, the largest magnitude twice with both signs, tiny and
// large magnitudes.
void expect_rounding_as_llama_cpp(const std::vector<float>& x, int64_t k, ActivationQuant activations) {
  const int64_t n = k, tokens = static_cast<int64_t>(x.size()) / k;
  const LlamaQ8 q = llama_q8(x, activations == ActivationQuant::kInt8SuperBlock, false);
  std::vector<float> expected(x.size());
  for (size_t i = 0; i < x.size(); ++i) expected[i] = static_cast<float>(q.v[i]) * q.d[i / 32];
  // Many tokens (the prepared path): the same rows repeated.
  std::vector<float> many;
  for (int rep = 0; rep < 3; ++rep) many.insert(many.end(), x.begin(), x.end());

  for (test::QuantForm form : {test::QuantForm::kInt8Symmetric, test::QuantForm::kInt4Zeros}) {
    test::RandomQuantWeight rw(form, n, k, 32, 1);
    Weight w = rw.weight;
    w.activations = activations;
    const bool int4 = form == test::QuantForm::kInt4Zeros;
    for (int64_t i = 0; i < n * (k / 32); ++i) w.scales.ptr<float>()[i] = 1.0f;
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < k; ++c) {
        if (int4) {
          uint8_t& byte = w.data.ptr<uint8_t>()[r * k / 2 + c / 2];
          const uint8_t code = c == r ? 9 : 8;
          byte = static_cast<uint8_t>(c % 2 ? (byte & 0x0f) | (code << 4) : (byte & 0xf0) | code);
        } else {
          w.data.ptr<int8_t>()[r * k + c] = c == r ? 1 : 0;
        }
      }
      if (int4)
        for (int64_t g = 0; g < k / 32; ++g) w.zeros.ptr<uint8_t>()[r * (k / 32) + g] = 8;
    }
    ASSERT_TRUE(int4 ? cpu::linear_w4_int8_supported(w) : cpu::linear_w8_int8_supported(w));
    const cpu::Isa saved = cpu::active_isa();
    for (cpu::Isa isa : {cpu::Isa::kAvx2, cpu::Isa::kAvx512}) {
      if (cpu::set_active_isa(isa) != isa) continue;
      for (const std::vector<float>* input : std::initializer_list<const std::vector<float>*>{&x, &many}) {
        const int64_t t_count = static_cast<int64_t>(input->size()) / k;
        std::vector<float> out(static_cast<size_t>(t_count * n), NAN);
        cpu::linear_quant_f32(out.data(), input->data(), t_count, w);
        for (int64_t t = 0; t < t_count; ++t)
          for (int64_t r = 0; r < n; ++r)
            ASSERT_EQ(out[t * n + r], expected[(t % tokens) * k + r])
                << test::quant_form_name(form) << " " << cpu::isa_name(isa) << " tokens " << t_count << " token " << t
                << " column " << r << " x " << (*input)[t * k + r];
      }
    }
    cpu::set_active_isa(saved);
  }
}

TEST(Int8BlockLinearRounding, ActivationsRoundAsLlamaCppQ8_0OnEveryPath) {
  std::vector<float> x;
  auto block = [&](float d, const std::vector<float>& steps) {  // 32 values of steps * d, steps padded with 0
    for (int j = 0; j < 32; ++j) x.push_back(j < static_cast<int>(steps.size()) ? steps[static_cast<size_t>(j)] * d : 0.0f);
  };
  std::vector<float> ties, near;
  for (int j = 0; j < 31; ++j) ties.push_back(static_cast<float>(j - 15) + 0.5f);  // -14.5 .. 15.5
  ties.push_back(127.0f);                                                          // amax: d is exactly the unit
  for (int j = 0; j < 31; ++j) near.push_back(static_cast<float>(j - 15) + 0.5f + (j % 2 ? 1e-3f : -1e-3f));
  near.insert(near.begin(), -127.0f);
  block(1.0f, ties);
  block(0.5f, ties);
  block(3.0e-5f, near);  // d below fp16's smallest normal: rounded to a subnormal, as llama.cpp stores it
  block(1.0f, {});       // all zero: d = 0
  block(0.37f, ties);    // d not a power of two: its fp16 rounding shows in every product
  block(1.0f, {-3.0f, 3.0f, 1.5f});
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (int j = 0; j < 4 * 32; ++j) x.push_back(dist(rng) * (j < 64 ? 1e3f : 1e-3f));
  expect_rounding_as_llama_cpp(x, 64, ActivationQuant::kInt8Block);
}

TEST(Int8BlockLinearRounding, ActivationsRoundAsLlamaCppQ8_KOnEveryPath) {
  std::vector<float> x(3 * 256, 0.0f);
  // Super-block 0: -127 first of the largest magnitude (iscale = 1: exact ties k + 0.5 of both signs), 127 after
  // it; super-block 1: 3 first, then -3 (iscale = -127 / 3: every value's sign flips, d < 0); 2: all zero.
  for (int j = 0; j < 256; ++j) x[static_cast<size_t>(j)] = static_cast<float>(j % 64 - 32) + (j % 3 ? 0.5f : 0.25f);
  x[7] = -127.0f;
  x[200] = 127.0f;
  std::mt19937 rng(6);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int j = 256; j < 512; ++j) x[static_cast<size_t>(j)] = 0.5f * dist(rng);  // below 3 in magnitude
  x[256 + 3] = 3.0f;
  x[256 + 90] = -3.0f;
  std::vector<float> more(2 * 256);  // tiny and large magnitudes
  for (int j = 0; j < 512; ++j) more[static_cast<size_t>(j)] = dist(rng) * (j < 256 ? 1e-4f : 1e4f);
  x.insert(x.end(), more.begin(), more.end());
  x.resize(6 * 256);  // and a last all-zero super-block: 3 tokens of 512
  expect_rounding_as_llama_cpp(x, 512, ActivationQuant::kInt8SuperBlock);
}

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
