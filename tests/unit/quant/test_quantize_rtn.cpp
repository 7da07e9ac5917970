// The quantizers' arithmetic on small hand-checked cases, the FP8 encoder against the decoder on every
// code and tie, the packers against the loader's converters, and the safetensors writer's header.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "pagoda/core/dtype.h"
#include "pagoda/loader/safetensors_writer.h"
#include "pagoda/quantize/awq_search.h"
#include "pagoda/quantize/rtn.h"

namespace pagoda {
namespace {

using namespace quantizer;

TEST(Fp8Encoder, EveryCodeRoundTripsAndTiesGoToEven) {
  for (int c = 0; c < 256; ++c) {
    const float v = f8e4m3_to_f32(static_cast<uint8_t>(c));
    if (std::isnan(v)) {
      EXPECT_EQ(f32_to_e4m3_saturating(v) & 0x7F, 0x7F);
      continue;
    }
    if (c == 0x80) continue;  // -0 encodes as 0x80 too, checked below
    EXPECT_EQ(f32_to_e4m3_saturating(v), c) << c;
  }
  EXPECT_EQ(f32_to_e4m3_saturating(-0.0f), 0x80);
  for (int c = 0; c < 0x7E; ++c) {  // midpoints between neighbouring positive codes
    const double a = f8e4m3_to_f32(static_cast<uint8_t>(c)), b = f8e4m3_to_f32(static_cast<uint8_t>(c + 1));
    const float mid = static_cast<float>((a + b) / 2);
    const int want = c % 2 == 0 ? c : c + 1;
    EXPECT_EQ(f32_to_e4m3_saturating(mid), want) << c;
    EXPECT_EQ(f32_to_e4m3_saturating(-mid), want | 0x80) << c;
  }
  EXPECT_EQ(f32_to_e4m3_saturating(1e6f), 0x7E);
  EXPECT_EQ(f32_to_e4m3_saturating(-1e6f), 0xFE);
  EXPECT_EQ(f32_to_e4m3_saturating(464.0f), 0x7E);
  EXPECT_EQ(f32_to_e4m3_saturating(std::numeric_limits<float>::infinity()), 0x7E);
}

TEST(AsymGroups, AutoAwqFormula) {
  Matrix w(1, 4);
  w.data = {-1.0f, 0.0f, 0.5f, 2.0f};  // s = 3/15 = 0.2, z = -round(-5) = 5
  const AsymGroupCodes q = quantize_asym_groups(w, 4);
  EXPECT_FLOAT_EQ(q.scales[0], 3.0f / 15.0f);
  EXPECT_EQ(q.zeros[0], 5);
  EXPECT_EQ(std::vector<int>(q.codes.begin(), q.codes.end()), (std::vector<int>{0, 5, 7, 15}));  // 0.5 / 0.2f < 2.5

  Matrix fake = w;
  fake_quantize_asym_groups(fake.data.data(), 1, 4, 4);
  EXPECT_FLOAT_EQ(fake.data[2], 2 * (3.0f / 15.0f));
}

TEST(SymInt, ClampThenRoundWithHalfRange) {
  Matrix w(1, 4);
  w.data = {-7.5f, 0.25f, 3.75f, 1.0f};  // absmax 7.5 / 7.5 = 1
  const SymCodes q = quantize_sym_int(w, 4, 0, DType::kF32);
  EXPECT_FLOAT_EQ(q.scales[0], 1.0f);
  EXPECT_EQ(std::vector<int>(q.codes.begin(), q.codes.end()), (std::vector<int>{-8, 0, 4, 1}));  // -7.5 and 3.75: ties to even
  Matrix zero(1, 4);
  EXPECT_EQ(quantize_sym_int(zero, 8, 0, DType::kBF16).scales[0], 0.0078125f);  // zero scale -> bf16 eps
}

TEST(SafetensorsWriter, HeaderSortedMetadataLastPadded) {
  std::vector<SafetensorsEntry> e;
  e.push_back(make_entry("b", DType::kF32, {1}, std::vector<float>{1.0f}));
  e.push_back(make_entry("a", DType::kI64, {2}, std::vector<int64_t>{3, 4}));
  EXPECT_EQ(safetensors_header(e, {{"format", "pt"}}),
            R"({"a":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[1],)"
            R"("data_offsets":[16,20]},"__metadata__":{"format":"pt"}})");
}

TEST(AwqSearch, ClipNeverWorseThanNoClipAndScalesNormalised) {
  Matrix w(8, 32), x(64, 32);
  for (size_t i = 0; i < w.data.size(); ++i) w.data[i] = std::sin(0.37f * static_cast<float>(i)) * (i % 7 == 0 ? 4.0f : 1.0f);
  for (size_t i = 0; i < x.data.size(); ++i) x.data[i] = std::cos(0.11f * static_cast<float>(i)) * (1.0f + static_cast<float>(i % 32) / 8);
  AwqSearchOptions o;
  o.group_size = 16;
  const std::vector<float> best = search_best_clip(w, x, o);
  ASSERT_EQ(best.size(), 16u);
  for (int64_t r = 0; r < 8; ++r)
    for (int g = 0; g < 2; ++g) {
      float mx = 0;
      for (int j = 0; j < 16; ++j) mx = std::max(mx, std::fabs(w.at(r, g * 16 + j)));
      EXPECT_LE(best[r * 2 + g], mx);
      EXPECT_GE(best[r * 2 + g], mx * 0.5f);
    }
  const Matrix ref = [&] {
    Matrix y(x.rows, w.rows);
    for (int64_t t = 0; t < x.rows; ++t)
      for (int64_t n = 0; n < w.rows; ++n)
        for (int64_t k = 0; k < w.cols; ++k) y.at(t, n) += x.at(t, k) * w.at(n, k);
    return y;
  }();
  auto forward = [&](const std::vector<Matrix>& c) {
    Matrix y(x.rows, w.rows);
    for (int64_t t = 0; t < x.rows; ++t)
      for (int64_t n = 0; n < w.rows; ++n)
        for (int64_t k = 0; k < w.cols; ++k) y.at(t, n) += x.at(t, k) * c[0].at(n, k);
    return y;
  };
  const ScaleSearchResult r = search_best_scales({&w}, x, ref, forward, o);
  ASSERT_EQ(r.scales.size(), 32u);
  const auto [mn, mx] = std::minmax_element(r.scales.begin(), r.scales.end());
  EXPECT_NEAR(*mn * *mx, 1.0f, 1e-4f);  // normalised by sqrt(max * min)
  EXPECT_LE(r.mse_best, mean_squared_error(ref, forward({scaled_fake_quant(w, r.scales, 16)})) + 1e-12);
}

}  // namespace
}  // namespace pagoda
