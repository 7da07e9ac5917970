// The CPU's compact weight forms (backend/cpu/compact_weights.h): each GGUF block type's scales, offsets and
// zero points, as the loader stores them, go into the form that holds them exactly (fp16; int8 codes times a
// base per 256 columns; no zero points for Q4_0's fixed 8), and the integer kernels compute the same bits from
// the compact weight as from the loaded one, on every instruction-set level, decode (streamed) and prompt
// (prepared) paths alike. Arrays no compact form holds exactly stay as they are.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "pagoda/backend/cpu/compact_weights.h"
#include "pagoda/backend/cpu/cpu_isa.h"
#include "pagoda/backend/cpu/linear_quant.h"
#include "pagoda/core/dtype.h"
#include "random_quant_weight.h"

namespace pagoda {
namespace {

std::mt19937 rng(17);

float random_f16(float lo, float hi) {  // an fp16 value in [lo, hi): what GGUF files store
  return f16_to_f32(f32_to_f16(std::uniform_real_distribution<float>(lo, hi)(rng)));
}

// The per-group values of GGUF's k-quants: per row and 256 columns an fp16 d, per group d * c in fp32 with c in
// [c_lo, c_hi] (Q4_K / Q5_K: 6-bit 0..63; Q6_K: int8 -128..127).
void fill_kquant(Tensor values, int64_t group_size, int c_lo, int c_hi) {
  const int64_t per_base = 256 / group_size;
  float* v = values.ptr<float>();
  for (int64_t i = 0; i < values.numel(); i += per_base) {
    const float d = random_f16(1e-4f, 3e-3f);
    for (int64_t j = 0; j < per_base; ++j) {
      const int c = j == 0 ? c_lo : j == 1 ? c_hi : std::uniform_int_distribution<int>(c_lo, c_hi)(rng);
      v[i + j] = d * static_cast<float>(c);  // both ends of the range (Q6_K's -128 for one) in every base
    }
  }
}

void fill_f16(Tensor values) {
  for (int64_t i = 0; i < values.numel(); ++i) values.ptr<float>()[i] = random_f16(1e-4f, 3e-2f);
}

// 8-bit codes in [lo, hi] (Q6_K: -32..31, Q5_0: -16..15), both ends in every row.
void fill_codes(Tensor codes, int lo, int hi) {
  auto* c = codes.ptr<int8_t>();
  const int64_t k = codes.dim(1);
  for (int64_t i = 0; i < codes.numel(); ++i)
    c[i] = static_cast<int8_t>(i % k == 0 ? lo : i % k == 1 ? hi : std::uniform_int_distribution<int>(lo, hi)(rng));
}

void fill_zeros(Tensor zeros, bool all_eight) {
  for (int64_t i = 0; i < zeros.numel(); ++i)
    zeros.ptr<uint8_t>()[i] = all_eight ? 8 : static_cast<uint8_t>(std::uniform_int_distribution<int>(0, 15)(rng));
}

std::vector<float> activations(int64_t count) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(count));
  for (float& v : x) v = dist(rng);
  return x;
}

// out = x · w^T through linear_quant_f32 on each level (AVX2; AVX512-VNNI where the machine has it).
std::vector<std::vector<float>> products(const Weight& w, const std::vector<float>& x, int64_t tokens) {
  std::vector<std::vector<float>> out;
  const cpu::Isa saved = cpu::active_isa();
  for (cpu::Isa isa : {cpu::Isa::kAvx2, cpu::Isa::kAvx512}) {
    if (cpu::set_active_isa(isa) != isa) continue;
    std::vector<float> o(static_cast<size_t>(tokens * w.num_rows()), NAN);
    cpu::linear_quant_f32(o.data(), x.data(), tokens, w);
    out.push_back(std::move(o));
  }
  cpu::set_active_isa(saved);
  return out;
}

struct Case {
  const char* name;
  test::QuantForm form;
  int64_t k, group;
  DType expected;       // the compact scales' dtype (F32: unchanged)
  bool drops_zeros;     // a 4-bit weight whose zero points all are 8
  bool six_bit;         // an 8-bit weight's codes in the 6-bit form (linear_w8_int8.h)
  std::function<void(Weight&)> make;
};

class CompactWeights : public ::testing::TestWithParam<int> {};

std::vector<Case> cases() {
  return {
      {"Q4_0", test::QuantForm::kInt4Zeros, 512, 32, DType::kF16, true, false,
       [](Weight& w) { fill_f16(w.scales); fill_zeros(w.zeros, true); }},
      {"Q4_K", test::QuantForm::kInt4Offsets, 512, 32, DType::kI8, false, false,
       [](Weight& w) { fill_kquant(w.scales, 32, 0, 63); fill_kquant(w.offsets, 32, 0, 63); }},
      {"Q4_1", test::QuantForm::kInt4Offsets, 224, 32, DType::kF16, false, false,
       [](Weight& w) { fill_f16(w.scales); fill_f16(w.offsets); }},
      {"AWQ-like zeros", test::QuantForm::kInt4Zeros, 512, 128, DType::kF16, false, false,
       [](Weight& w) { fill_f16(w.scales); fill_zeros(w.zeros, false); }},
      {"Q6_K", test::QuantForm::kInt8Symmetric, 512, 16, DType::kI8, false, true,
       [](Weight& w) { fill_codes(w.data, -32, 31); fill_kquant(w.scales, 16, -128, 127); }},
      {"Q5_K", test::QuantForm::kInt8Offsets, 256, 32, DType::kI8, false, true,
       [](Weight& w) { fill_kquant(w.scales, 32, 0, 63); fill_kquant(w.offsets, 32, 0, 63); }},
      {"Q8_0", test::QuantForm::kInt8Symmetric, 320, 32, DType::kF16, false, false, [](Weight& w) { fill_f16(w.scales); }},
      {"Q5_1", test::QuantForm::kInt8Offsets, 192, 32, DType::kF16, false, true,
       [](Weight& w) { fill_f16(w.scales); fill_f16(w.offsets); }},
      {"Q5_0", test::QuantForm::kInt8Symmetric, 320, 32, DType::kF16, false, true,
       [](Weight& w) { fill_codes(w.data, -16, 15); fill_f16(w.scales); }},
      // 6-bit codes in rows whose last chunk is half a chunk: the codes stay 8-bit (the kernels pad that chunk)
      {"Q5_0 tail", test::QuantForm::kInt8Symmetric, 224, 32, DType::kF16, false, false,
       [](Weight& w) { fill_codes(w.data, -16, 15); fill_f16(w.scales); }},
      // groups of 128 columns: the chunks go through the kernels' general path (a group spans chunks)
      {"6-bit codes, groups of 128", test::QuantForm::kInt8Symmetric, 512, 128, DType::kF16, false, true,
       [](Weight& w) { fill_codes(w.data, -32, 31); fill_f16(w.scales); }},
      // one code past 31: the codes stay 8-bit
      {"6-bit but one", test::QuantForm::kInt8Symmetric, 256, 16, DType::kI8, false, false,
       [](Weight& w) { fill_codes(w.data, -32, 31); w.data.ptr<int8_t>()[w.data.numel() - 1] = 32; fill_kquant(w.scales, 16, -128, 127); }},
      // k-quant scales with offsets that neither form holds: one form for both, so both stay fp32
      {"mixed", test::QuantForm::kInt4Offsets, 512, 32, DType::kF32, false, false,
       [](Weight& w) { fill_kquant(w.scales, 32, 0, 63); }},
      // fp32 scales (RandomQuantWeight's): nothing smaller holds them
      {"fp32", test::QuantForm::kInt8Symmetric, 256, 32, DType::kF32, false, false, [](Weight&) {}},
  };
}

TEST_P(CompactWeights, SameBitsFromFewerBytes) {
  const Case c = cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(c.name);
  constexpr int64_t n = 37;
  test::RandomQuantWeight rw(c.form, n, c.k, c.group, 5);
  Weight w = rw.weight;
  w.activations = ActivationQuant::kInt8Block;
  c.make(w);
  std::vector<HostTensor> storage;
  const Weight compact = cpu::compact_weight(w, storage);
  EXPECT_EQ(compact.scales.dtype, c.expected);
  if (!compact.offsets.empty()) {
    EXPECT_EQ(compact.offsets.dtype, c.expected);
  }
  EXPECT_EQ(compact.zeros.empty(), w.zeros.empty() || c.drops_zeros);
  EXPECT_EQ(compact.scales_base.empty(), c.expected != DType::kI8);
  EXPECT_EQ(compact.data.dtype, c.six_bit ? DType::kU8 : w.data.dtype);
  if (c.six_bit) {
    EXPECT_EQ(compact.data.nbytes(), w.data.nbytes() / 4 * 3);
  }
  if (c.expected == DType::kF32 && !c.drops_zeros) {
    EXPECT_EQ(compact.scales.data, w.scales.data);
    EXPECT_TRUE(storage.empty());
  } else {
    EXPECT_LT(compact.nbytes(), w.nbytes());
  }
  for (int64_t tokens : {1, 2, 3, 4, 5, 9}) {  // up to 4 the rows stream; above, they are prepared once
    const std::vector<float> x = activations(tokens * c.k);
    const auto expected = products(w, x, tokens), got = products(compact, x, tokens);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t level = 0; level < got.size(); ++level)
      for (size_t i = 0; i < got[level].size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[level][i]), std::bit_cast<uint32_t>(expected[level][i]))
            << "level " << level << " tokens " << tokens << " output " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(GgufTypes, CompactWeights, ::testing::Range(0, static_cast<int>(cases().size())),
                         [](const auto& info) {
                           std::string name = cases()[static_cast<size_t>(info.param)].name;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

// Only weights the integer kernels take are compacted: fp32-input weights (AWQ, GPTQ, compressed-tensors
// checkpoints: ActivationQuant::kNone) and shapes the kernels refuse keep the loader's arrays, which the
// dequantizing path reads.
TEST(CompactWeightsScope, OnlyTheIntegerKernelsWeights) {
  test::RandomQuantWeight awq(test::QuantForm::kInt4Zeros, 8, 256, 128, 3);
  fill_f16(awq.weight.scales);
  std::vector<HostTensor> storage;
  EXPECT_EQ(cpu::compact_weight(awq.weight, storage).scales.data, awq.weight.scales.data);
  test::RandomQuantWeight odd(test::QuantForm::kInt4Zeros, 8, 96, 96, 3);  // a lane would straddle groups
  Weight w = odd.weight;
  w.activations = ActivationQuant::kInt8Block;
  fill_f16(w.scales);
  EXPECT_EQ(cpu::compact_weight(w, storage).scales.data, w.scales.data);
  EXPECT_TRUE(storage.empty());
}

}  // namespace
}  // namespace pagoda
