// A test-side GGUF block encoder: writes a block of any converted type from chosen codes and scales,
// placing every field by its bit position in the block (from ggml-common.h's block structs, written
// independently of loader/gguf_blocks.cpp), and llama.cpp's dequantized value of each element from the
// chosen numbers (dequantize_row_* formulas, in their fp32 order of operations).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "pagoda/core/dtype.h"
#include "pagoda/loader/gguf_blocks.h"

namespace pagoda::test {

// The chosen contents of one block.
struct BlockParams {
  uint16_t d = 0;               // f16 bits of d
  uint16_t m = 0;               // f16 bits of m (Q4_1, Q5_1) or dmin (Q4_K, Q5_K)
  std::array<int, 16> sc{};     // sub-block scales: 6-bit (Q4_K, Q5_K: 8 of them) or int8 (Q6_K: 16)
  std::array<int, 8> mins{};    // sub-block mins, 6-bit (Q4_K, Q5_K)
  std::vector<uint32_t> codes;  // unsigned codes, one per value of the block
};

// Sets bits [bit, bit + width) of `bytes`, counting bit b as bit b % 8 of byte b / 8 (LSB first).
inline void put_bits(std::vector<uint8_t>& bytes, size_t bit, int width, uint32_t value) {
  for (int i = 0; i < width; ++i) {
    const size_t b = bit + static_cast<size_t>(i);
    if ((value >> i) & 1u) bytes[b / 8] = static_cast<uint8_t>(bytes[b / 8] | (1u << (b % 8)));
  }
}
inline void put_f16(std::vector<uint8_t>& bytes, size_t byte, uint16_t v) { put_bits(bytes, 8 * byte, 16, v); }

struct TypeCase {
  GgmlType type;
  const char* name;
  int64_t block_elems, block_bytes;
  int bits;
  int64_t group;
};

inline const TypeCase kCases[] = {
    {GgmlType::kQ4_0, "Q4_0", 32, 18, 4, 32},   {GgmlType::kQ4_1, "Q4_1", 32, 20, 4, 32},
    {GgmlType::kQ5_0, "Q5_0", 32, 22, 5, 32},   {GgmlType::kQ5_1, "Q5_1", 32, 24, 5, 32},
    {GgmlType::kQ4_K, "Q4_K", 256, 144, 4, 32}, {GgmlType::kQ5_K, "Q5_K", 256, 176, 5, 32},
    {GgmlType::kQ6_K, "Q6_K", 256, 210, 6, 16}, {GgmlType::kQ8_0, "Q8_0", 32, 34, 8, 32},
};

// Bit position in the block of the low 4 bits of value i, and of its high bits (Q5: bit 4; Q6_K: bits 4-5).
inline size_t low_bits_at(GgmlType t, int i) {
  switch (t) {
    case GgmlType::kQ4_0: return 8 * (2 + i % 16) + 4 * (i / 16);  // qs after d
    case GgmlType::kQ4_1: return 8 * (4 + i % 16) + 4 * (i / 16);  // qs after d, m
    case GgmlType::kQ5_0: return 8 * (6 + i % 16) + 4 * (i / 16);  // qs after d, qh
    case GgmlType::kQ5_1: return 8 * (8 + i % 16) + 4 * (i / 16);  // qs after d, m, qh
    case GgmlType::kQ8_0: return 8 * (2 + i);                       // int8 qs after d
    case GgmlType::kQ4_K: return 8 * (16 + 32 * (i / 64) + i % 32) + 4 * ((i % 64) / 32);
    case GgmlType::kQ5_K: return 8 * (48 + 32 * (i / 64) + i % 32) + 4 * ((i % 64) / 32);
    case GgmlType::kQ6_K: {  // ql[128]: half h = i / 128, quarter t = (i % 128) / 32, l = i % 32
      const int h = i / 128, t = (i % 128) / 32, l = i % 32;
      return 8 * (64 * h + l + 32 * (t % 2)) + 4 * (t / 2);
    }
    default: return 0;
  }
}
inline size_t high_bits_at(GgmlType t, int i) {
  switch (t) {
    case GgmlType::kQ5_0: return 8 * 2 + i;  // u32 qh at byte 2, bit i
    case GgmlType::kQ5_1: return 8 * 4 + i;  // u32 qh at byte 4
    case GgmlType::kQ8_0: return 8 * (2 + i) + 4;  // the code byte's high nibble
    case GgmlType::kQ5_K: return 8 * (16 + i % 32) + 2 * (i / 64) + (i % 64) / 32;  // qh[32] at byte 16
    case GgmlType::kQ6_K: {  // qh[64] at byte 128, two bits per value
      const int h = i / 128, t = (i % 128) / 32, l = i % 32;
      return 8 * (128 + 32 * h + l) + 2 * t;
    }
    default: return 0;
  }
}

inline std::vector<uint8_t> encode(const TypeCase& c, const BlockParams& p) {
  std::vector<uint8_t> b(static_cast<size_t>(c.block_bytes), 0);
  switch (c.type) {
    case GgmlType::kQ4_0: case GgmlType::kQ5_0: case GgmlType::kQ8_0: put_f16(b, 0, p.d); break;
    case GgmlType::kQ4_1: case GgmlType::kQ5_1: put_f16(b, 0, p.d); put_f16(b, 2, p.m); break;
    case GgmlType::kQ4_K: case GgmlType::kQ5_K:
      put_f16(b, 0, p.d);
      put_f16(b, 2, p.m);
      // scales[12] at byte 4: sub-blocks 0-3 in the low 6 bits of bytes 0-3 (scale) and 4-7 (min);
      // sub-blocks 4-7 split: low 4 bits in bytes 8-11 (scale low nibble, min high nibble), top 2 bits in
      // bits 6-7 of bytes 0-3 (scale) and 4-7 (min).
      for (int j = 0; j < 8; ++j) {
        const auto sc = static_cast<uint32_t>(p.sc[j]), m = static_cast<uint32_t>(p.mins[j]);
        if (j < 4) {
          put_bits(b, 8 * (4 + j), 6, sc);
          put_bits(b, 8 * (4 + j + 4), 6, m);
        } else {
          put_bits(b, 8 * (4 + j + 4), 4, sc & 15);
          put_bits(b, 8 * (4 + j + 4) + 4, 4, m & 15);
          put_bits(b, 8 * (4 + j - 4) + 6, 2, sc >> 4);
          put_bits(b, 8 * (4 + j) + 6, 2, m >> 4);
        }
      }
      break;
    case GgmlType::kQ6_K:
      for (int g = 0; g < 16; ++g) put_bits(b, 8 * (192 + g), 8, static_cast<uint8_t>(static_cast<int8_t>(p.sc[g])));
      put_f16(b, 208, p.d);
      break;
    default: break;
  }
  for (int i = 0; i < c.block_elems; ++i) {
    const uint32_t q = p.codes[static_cast<size_t>(i)];
    put_bits(b, low_bits_at(c.type, i), 4, q & 15);
    if (c.bits > 4) put_bits(b, high_bits_at(c.type, i), c.bits - 4, q >> 4);
  }
  return b;
}

// llama.cpp's value of element i, in its fp32 order of operations.
inline float expected_value(const TypeCase& c, const BlockParams& p, int i) {
  const float d = f16_to_f32(p.d), m = f16_to_f32(p.m);
  const auto q = static_cast<int>(p.codes[static_cast<size_t>(i)]);
  switch (c.type) {
    case GgmlType::kQ4_0: return static_cast<float>(q - 8) * d;
    case GgmlType::kQ5_0: return static_cast<float>(q - 16) * d;
    case GgmlType::kQ8_0: return static_cast<float>(static_cast<int8_t>(q)) * d;  // the code byte is int8
    case GgmlType::kQ4_1: case GgmlType::kQ5_1: return static_cast<float>(q) * d + m;
    case GgmlType::kQ4_K: case GgmlType::kQ5_K: {
      const float scale = d * static_cast<float>(p.sc[i / 32]);
      const float min = m * static_cast<float>(p.mins[i / 32]);
      return scale * static_cast<float>(q) - min;
    }
    case GgmlType::kQ6_K: {
      const float scale = d * static_cast<float>(p.sc[i / 16]);
      return scale * static_cast<float>(q - 32);
    }
    default: return 0;
  }
}

inline const TypeCase& type_case(GgmlType type) {
  for (const TypeCase& c : kCases)
    if (c.type == type) return c;
  return kCases[0];
}

}  // namespace pagoda::test
