// make_rope_params: theta^(-2i/d) frequencies, the llama3 rule, and rounding to RopeConfig::inv_freq_dtype.
#include "pagoda/model/rope.h"

#include <gtest/gtest.h>

#include <cmath>

#include "pagoda/core/dtype.h"

namespace pagoda {
namespace {

TEST(RopeParams, DefaultFrequenciesAreThetaPowers) {
  const RopeParams p = make_rope_params(RopeConfig{.theta = 10000.0}, 8);
  ASSERT_EQ(p.inv_freq.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const double exact = std::pow(10000.0, -2.0 * i / 8);  // 1, 0.1, 0.01, 0.001
    EXPECT_NEAR(p.inv_freq[i], exact, 1e-6 * exact) << i;
  }
}

TEST(RopeParams, Bf16DtypeRoundsEachFrequencyAndFloat32KeepsIt) {
  RopeConfig rope{.type = RopeType::kLlama3, .theta = 500000.0, .factor = 8.0, .low_freq_factor = 1.0,
                  .high_freq_factor = 4.0, .original_max_position_embeddings = 8192};
  const RopeParams f32 = make_rope_params(rope, 128);
  rope.inv_freq_dtype = DType::kBF16;
  const RopeParams bf16 = make_rope_params(rope, 128);
  ASSERT_EQ(f32.inv_freq.size(), bf16.inv_freq.size());
  int moved = 0;
  for (size_t i = 0; i < f32.inv_freq.size(); ++i) {
    EXPECT_EQ(bf16.inv_freq[i], bf16_to_f32(f32_to_bf16(f32.inv_freq[i]))) << i;
    moved += f32.inv_freq[i] != bf16.inv_freq[i];
  }
  EXPECT_GT(moved, 32);  // nearly every frequency moves: float32 is not bf16-representable in general
}

}  // namespace
}  // namespace pagoda
