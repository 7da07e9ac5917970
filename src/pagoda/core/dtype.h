// Element types of tensors and weights, their sizes, and scalar conversions between fp32, fp16, bf16 and
// fp8 (e4m3).
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace pagoda {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kI32,
  kI64,
  kU8,
  kI8,
  kF8E4M3,  // float8_e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, S.1111.111 is NaN
  kQ8_0,  // GGML block format: 32 values = f16 scale + 32 x int8 (34 bytes)
  kQ4_0,  // GGML block format: 32 values = f16 scale + 16 bytes of 4-bit values (18 bytes)
};

std::string_view dtype_name(DType dtype);

// Number of elements per storage block (1 for plain types, 32 for GGML block formats).
int64_t dtype_block_elems(DType dtype);
// Bytes per storage block.
int64_t dtype_block_bytes(DType dtype);
// Bytes needed to hold `numel` elements (numel must be a multiple of the block size).
int64_t dtype_storage_bytes(DType dtype, int64_t numel);
bool dtype_is_quantized(DType dtype);

inline float bf16_to_f32(uint16_t v) { return std::bit_cast<float>(static_cast<uint32_t>(v) << 16); }

inline uint16_t f32_to_bf16(float f) {  // round to nearest even; NaN stays NaN
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float f16_to_f32(uint16_t h);
// float8_e4m3fn (OCP FP8, as torch.float8_e4m3fn) to fp32: exact (every e4m3 value is an fp32 value).
float f8e4m3_to_f32(uint8_t v);
// The float8_e4m3fn code of x: round to nearest even, saturating to +-448, NaN -> 0x7F with x's sign.
inline uint8_t f32_to_e4m3_saturating(float x) {
  // From the bits, without libm calls (this runs per weight at start-up and per activation on the CPU): the
  // same codes as rounding |x| / 2^(exponent - 3) half to even, with e4m3's subnormals sharing exponent -6.
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint8_t sign = (u >> 31) ? 0x80 : 0x00;
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7F);  // NaN
  float a = std::bit_cast<float>(u & 0x7fffffffu);
  if (a > 448.0f) a = 448.0f;
  if (a < 0.015625f) {  // below 2^-6: steps of 2^-9, the code is the rounded multiple (8 is 2^-6 itself)
    return static_cast<uint8_t>(sign | static_cast<int>(std::nearbyint(a * 512.0f)));
  }
  const uint32_t bits = std::bit_cast<uint32_t>(a);
  const int exponent = static_cast<int>(bits >> 23) - 127;  // -6 .. 8
  const uint32_t fraction = bits & 0x7fffffu;
  uint32_t q = fraction >> 20;  // the 3 mantissa bits; round the 20 below half to even
  const uint32_t rest = fraction & 0xfffffu;
  q += static_cast<uint32_t>(rest > 0x80000u) | (static_cast<uint32_t>(rest == 0x80000u) & q & 1u);  // 8 carries over
  return static_cast<uint8_t>(sign | ((exponent + 7) * 8 + static_cast<int>(q)));
}
uint16_t f32_to_f16(float f);

}  // namespace pagoda
