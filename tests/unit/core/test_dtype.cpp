// Tests for dtype metadata and the scalar f16/bf16 conversions: exhaustive round trips over all 16-bit
// patterns, known values, subnormals, overflow, and round-to-nearest-even at every f16 midpoint.
#include "pagoda/core/dtype.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace pagoda {
namespace {

bool f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool bf16_is_nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

// ---- sizes ----

TEST(DType, BlockSizes) {
  EXPECT_EQ(dtype_block_elems(DType::kF32), 1);
  EXPECT_EQ(dtype_block_elems(DType::kQ8_0), 32);
  EXPECT_EQ(dtype_block_elems(DType::kQ4_0), 32);
  EXPECT_EQ(dtype_block_bytes(DType::kQ8_0), 34);  // f16 scale + 32 int8
  EXPECT_EQ(dtype_block_bytes(DType::kQ4_0), 18);  // f16 scale + 16 bytes of nibbles
  EXPECT_TRUE(dtype_is_quantized(DType::kQ4_0));
  EXPECT_FALSE(dtype_is_quantized(DType::kBF16));
  EXPECT_EQ(dtype_name(DType::kQ8_0), "Q8_0");
}

TEST(DType, StorageBytes) {
  EXPECT_EQ(dtype_storage_bytes(DType::kF32, 10), 40);
  EXPECT_EQ(dtype_storage_bytes(DType::kF16, 10), 20);
  EXPECT_EQ(dtype_storage_bytes(DType::kBF16, 3), 6);
  EXPECT_EQ(dtype_storage_bytes(DType::kI64, 3), 24);
  EXPECT_EQ(dtype_storage_bytes(DType::kU8, 7), 7);
  EXPECT_EQ(dtype_storage_bytes(DType::kQ8_0, 32), 34);
  EXPECT_EQ(dtype_storage_bytes(DType::kQ8_0, 4096), 128 * 34);
  EXPECT_EQ(dtype_storage_bytes(DType::kQ4_0, 96), 3 * 18);
  EXPECT_EQ(dtype_storage_bytes(DType::kQ4_0, 0), 0);
}

TEST(DTypeDeathTest, StorageBytesRejectsPartialBlocks) {
  EXPECT_DEATH(dtype_storage_bytes(DType::kQ4_0, 33), "multiple");
}

// ---- f16 ----

TEST(F16, KnownValues) {
  EXPECT_EQ(f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(0.5f), 0x3800);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);            // largest finite
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1023.0f, -24)), 0x03ff);  // largest subnormal

  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
  EXPECT_EQ(f16_to_f32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_to_f32(0xfc00), -std::numeric_limits<float>::infinity());
}

TEST(F16, OverflowUnderflowAndSpecials) {
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);  // below the midpoint to 2^16
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // the midpoint rounds to even, which is 2^16: inf
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xfc00);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // half the smallest subnormal: ties to even (0)
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);  // above the midpoint
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp: ties to even (2)
  EXPECT_EQ(f32_to_f16(1e-10f), 0x0000);
  EXPECT_EQ(f32_to_f16(-1e-10f), 0x8000);
  EXPECT_TRUE(f16_is_nan(f32_to_f16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(f16_is_nan(f32_to_f16(std::numeric_limits<float>::signaling_NaN())));
}

TEST(F16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // midpoint 1 / 1+ulp: even is 0x3c00
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // midpoint 0x3c01 / 0x3c02
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  EXPECT_EQ(f32_to_f16(2047.5f), 0x67ff + 1);  // 2047 | 2048 midpoint -> 2048 (even)
  EXPECT_EQ(f32_to_f16(2046.5f), 0x67fe);      // 2046 | 2047 midpoint -> 2046 (even)
}

TEST(F16, RoundTripsEveryBitPattern) {
  for (uint32_t i = 0; i < 0x10000u; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = f16_to_f32(h);
    if (f16_is_nan(h)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << i;
      EXPECT_TRUE(f16_is_nan(f32_to_f16(f))) << std::hex << i;
      EXPECT_EQ(f32_to_f16(f) & 0x8000u, h & 0x8000u) << std::hex << i;
    } else {
      ASSERT_EQ(f32_to_f16(f), h) << std::hex << i;
    }
  }
}

TEST(F16, EveryMidpointRoundsToEven) {
  // Between each pair of adjacent finite positive halves: the midpoint (exact in float) goes to the even
  // one, and the floats just either side of it go to the nearer one. Negative values mirror the sign bit.
  for (uint16_t h = 0; h < 0x7bff; ++h) {
    const float lo = f16_to_f32(h), hi = f16_to_f32(static_cast<uint16_t>(h + 1));
    const float mid = (lo + hi) / 2;
    ASSERT_GT(mid, lo);
    ASSERT_LT(mid, hi);
    const uint16_t even = (h & 1u) ? static_cast<uint16_t>(h + 1) : h;
    ASSERT_EQ(f32_to_f16(mid), even) << std::hex << h;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid, 0.0f)), h) << std::hex << h;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid, 1e9f)), h + 1) << std::hex << h;
    ASSERT_EQ(f32_to_f16(-mid), even | 0x8000u) << std::hex << h;
  }
}

// ---- bf16 ----

TEST(BF16, KnownValues) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // above the last midpoint: inf
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_TRUE(bf16_is_nan(f32_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(bf16_is_nan(f32_to_bf16(std::bit_cast<float>(0x7f800001u))));  // payload only in low bits
}

TEST(BF16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // midpoint: even
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(3.0f, -8)), 0x3f82);  // midpoint: even
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 0.0f)), 0x3f80);
}

TEST(BF16, RoundTripsEveryBitPattern) {
  for (uint32_t i = 0; i < 0x10000u; ++i) {
    const auto b = static_cast<uint16_t>(i);
    const float f = bf16_to_f32(b);
    if (bf16_is_nan(b)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << i;
      EXPECT_TRUE(bf16_is_nan(f32_to_bf16(f))) << std::hex << i;
    } else {
      ASSERT_EQ(f32_to_bf16(f), b) << std::hex << i;
    }
  }
}

}  // namespace
namespace {

// The e4m3 rounding by its definition (frexp / ldexp / nearbyint): what f32_to_e4m3_saturating computes from
// the bits.
uint8_t e4m3_by_definition(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return static_cast<uint8_t>(sign | 0x7F);
  const float a = std::min(std::fabs(x), 448.0f);
  int e = 0;
  (void)std::frexp(a, &e);
  const int exponent = a == 0.0f ? -6 : std::max(e - 1, -6);
  const int mantissa = static_cast<int>(std::nearbyint(std::ldexp(a, -(exponent - 3))));
  return static_cast<uint8_t>(sign | ((exponent + 7) * 8 + mantissa - 8));
}

}  // namespace

TEST(E4M3, EqualsTheDefinitionOnEveryBf16AndRandomFloats) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {  // every bf16 value: every exponent, both signs, specials
    const float x = std::bit_cast<float>(b << 16);
    ASSERT_EQ(f32_to_e4m3_saturating(x), e4m3_by_definition(x)) << x << " bits " << b;
  }
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 1000000; ++i) {
    const float x = std::bit_cast<float>(bits(rng));
    ASSERT_EQ(f32_to_e4m3_saturating(x), e4m3_by_definition(x)) << x;
  }
  // Every midpoint between neighbouring codes (ties go to the even code) and its float neighbours.
  for (int c = 0; c < 0x7E; ++c) {
    const float mid = (f8e4m3_to_f32(static_cast<uint8_t>(c)) + f8e4m3_to_f32(static_cast<uint8_t>(c + 1))) / 2;
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1000.0f), -mid}) {
      EXPECT_EQ(f32_to_e4m3_saturating(x), e4m3_by_definition(x)) << x;
    }
  }
  EXPECT_EQ(f32_to_e4m3_saturating(1e9f), 0x7E);  // saturates at 448
  EXPECT_EQ(f32_to_e4m3_saturating(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_EQ(f32_to_e4m3_saturating(std::numeric_limits<float>::quiet_NaN()), 0x7F);
}

}  // namespace pagoda
