// The GGML type table and the block decoders. Block layouts (little-endian, f16 = IEEE half):
//   Q4_0 (18 B / 32):  f16 d; u8 qs[16]              value j: qs[j] & 15, value j + 16: qs[j] >> 4
//   Q4_1 (20 B / 32):  f16 d, m; u8 qs[16]           as Q4_0; value = q d + m
//   Q5_0 (22 B / 32):  f16 d; u32 qh; u8 qs[16]      as Q4_0, plus bit 4 of value j = bit j of qh
//   Q5_1 (24 B / 32):  f16 d, m; u32 qh; u8 qs[16]   as Q5_0; value = q d + m
//   Q4_K (144 B / 256): f16 d, dmin; u8 scales[12]; u8 qs[128]
//       8 sub-blocks of 32 with 6-bit scale sc and min m packed in `scales` (scale_min_k4); values
//       64c + l (sub-block 2c) are qs[32c + l] & 15, values 64c + 32 + l (sub-block 2c + 1) qs[32c + l] >> 4;
//       value = (d sc) q - (dmin m)
//   Q5_K (176 B / 256): f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]
//       as Q4_K, plus bit 4 of value 64c + l = bit 2c of qh[l], of value 64c + 32 + l = bit 2c + 1 of qh[l]
//   Q6_K (210 B / 256): u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d
//       two halves of 128; in half h, for l < 32 and quarter t (0..3), value 128h + 32t + l has low nibble
//       ql[64h + l + 32 (t & 1)] >> 4 (t >> 1) and high bits (qh[32h + l] >> 2t) & 3; 16 groups of 16 with
//       scale d sc[g]; value = (d sc) (q - 32)
#include "pagoda/loader/gguf_blocks.h"

#include <fmt/format.h>

#include <array>
#include <cstring>

#include "pagoda/core/check.h"

namespace pagoda {
namespace {

constexpr int64_t kQK = 32;   // values per block of the 32-value types
constexpr int64_t kQKK = 256; // values per k-quant super-block

constexpr std::array<GgmlTypeInfo, 31> kTypes = {{
    {GgmlType::kF32, "F32", 1, 4},
    {GgmlType::kF16, "F16", 1, 2},
    {GgmlType::kBF16, "BF16", 1, 2},
    {GgmlType::kQ4_0, "Q4_0", kQK, 18},
    {GgmlType::kQ4_1, "Q4_1", kQK, 20},
    {GgmlType::kQ5_0, "Q5_0", kQK, 22},
    {GgmlType::kQ5_1, "Q5_1", kQK, 24},
    {GgmlType::kQ8_0, "Q8_0", kQK, 34},
    {GgmlType::kQ4_K, "Q4_K", kQKK, 144},
    {GgmlType::kQ5_K, "Q5_K", kQKK, 176},
    {GgmlType::kQ6_K, "Q6_K", kQKK, 210},
    // Known, not loaded (block_elems 0): named in the error.
    {GgmlType::kQ8_1, "Q8_1"},
    {GgmlType::kQ2_K, "Q2_K"},
    {GgmlType::kQ3_K, "Q3_K"},
    {GgmlType::kQ8_K, "Q8_K"},
    {GgmlType::kIQ2_XXS, "IQ2_XXS"},
    {GgmlType::kIQ2_XS, "IQ2_XS"},
    {GgmlType::kIQ3_XXS, "IQ3_XXS"},
    {GgmlType::kIQ1_S, "IQ1_S"},
    {GgmlType::kIQ4_NL, "IQ4_NL"},
    {GgmlType::kIQ3_S, "IQ3_S"},
    {GgmlType::kIQ2_S, "IQ2_S"},
    {GgmlType::kIQ4_XS, "IQ4_XS"},
    {GgmlType::kI8, "I8"},
    {GgmlType::kI16, "I16"},
    {GgmlType::kI32, "I32"},
    {GgmlType::kI64, "I64"},
    {GgmlType::kF64, "F64"},
    {GgmlType::kIQ1_M, "IQ1_M"},
    {GgmlType::kTQ1_0, "TQ1_0"},
    {GgmlType::kTQ2_0, "TQ2_0"},
}};

float load_f16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return f16_to_f32(v);
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The 32 4-bit codes of a Q4_0 / Q4_1 / Q5_0 / Q5_1 block: value j in the low nibble of qs[j], value j + 16 in
// its high nibble; with `qh` (the Q5 types), bit j of qh is bit 4 of value j.
void decode_32(const uint8_t* qs, const uint32_t* qh, uint8_t* codes) {
  for (int j = 0; j < 16; ++j) {
    codes[j] = qs[j] & 0x0f;
    codes[j + 16] = qs[j] >> 4;
  }
  if (qh != nullptr)
    for (int j = 0; j < 32; ++j) codes[j] = static_cast<uint8_t>(codes[j] | (((*qh >> j) & 1u) << 4));
}

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes. Sub-blocks 0..3 keep
// theirs in the low 6 bits of bytes j (scale) and j + 4 (min); sub-blocks 4..7 keep their low 4 bits in the
// nibbles of byte j + 4 (scale low, min high) and their top 2 bits in the top 2 bits of bytes j - 4 (scale)
// and j (min).
void scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q4_K and Q5_K super-blocks (qh null for Q4_K): 256 codes, 8 scales and 8 offsets.
void decode_k4(const uint8_t* block, bool has_qh, uint8_t* codes, float* scales, float* offsets) {
  const float d = load_f16(block);
  const float dmin = load_f16(block + 2);
  const uint8_t* packed = block + 4;
  const uint8_t* qh = has_qh ? block + 16 : nullptr;
  const uint8_t* qs = block + (has_qh ? 48 : 16);
  for (int sub = 0; sub < 8; ++sub) {
    uint8_t sc, m;
    scale_min_k4(sub, packed, &sc, &m);
    scales[sub] = d * static_cast<float>(sc);
    offsets[sub] = dmin * static_cast<float>(m);
  }
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      uint8_t lo = qs[32 * c + l] & 0x0f, hi = qs[32 * c + l] >> 4;
      if (qh != nullptr) {
        lo = static_cast<uint8_t>(lo | (((qh[l] >> (2 * c)) & 1u) << 4));
        hi = static_cast<uint8_t>(hi | (((qh[l] >> (2 * c + 1)) & 1u) << 4));
      }
      codes[64 * c + l] = lo;
      codes[64 * c + 32 + l] = hi;
    }
  }
}

// Q6_K super-block: 256 codes, 16 scales.
void decode_q6_k(const uint8_t* block, uint8_t* codes, float* scales) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(block + 192);
  const float d = load_f16(block + 208);
  for (int g = 0; g < 16; ++g) scales[g] = d * static_cast<float>(sc[g]);
  for (int h = 0; h < 2; ++h)
    for (int t = 0; t < 4; ++t)
      for (int l = 0; l < 32; ++l) {
        const uint8_t low = (ql[64 * h + l + 32 * (t & 1)] >> (4 * (t >> 1))) & 0x0f;
        const uint8_t high = (qh[32 * h + l] >> (2 * t)) & 3;
        codes[128 * h + 32 * t + l] = static_cast<uint8_t>(low | (high << 4));
      }
}

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id) {
  for (const GgmlTypeInfo& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return t;
  return std::nullopt;
}

std::optional<GgmlTypeInfo> ggml_type_by_name(std::string_view name) {
  for (const GgmlTypeInfo& t : kTypes)
    if (t.name == name) return t;
  return std::nullopt;
}

std::string ggml_loadable_type_names() {
  std::string out;
  for (const GgmlTypeInfo& t : kTypes) {
    if (!t.loadable()) continue;
    if (!out.empty()) out += ", ";
    out += t.name;
  }
  return out;
}

bool ggml_type_is_float(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16;
}

std::optional<DType> ggml_type_dtype(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return DType::kF32;
    case GgmlType::kF16: return DType::kF16;
    case GgmlType::kBF16: return DType::kBF16;
    case GgmlType::kQ8_0: return DType::kQ8_0;
    case GgmlType::kQ4_0: return DType::kQ4_0;
    default: return std::nullopt;
  }
}

std::optional<GgufBlockConversion> gguf_block_conversion(GgmlType type) {
  using enum QuantScheme;
  switch (type) {
    case GgmlType::kQ4_0: return GgufBlockConversion{kInt4Group, 4, 32, 8, false};
    case GgmlType::kQ8_0: return GgufBlockConversion{kInt8Channel, 8, 32, 128, false};
    case GgmlType::kQ4_1: return GgufBlockConversion{kInt4Group, 4, 32, 0, true};
    case GgmlType::kQ4_K: return GgufBlockConversion{kInt4Group, 4, 32, 0, true};
    case GgmlType::kQ5_0: return GgufBlockConversion{kInt8Channel, 5, 32, 16, false};
    case GgmlType::kQ5_1: return GgufBlockConversion{kInt8Channel, 5, 32, 0, true};
    case GgmlType::kQ5_K: return GgufBlockConversion{kInt8Channel, 5, 32, 0, true};
    case GgmlType::kQ6_K: return GgufBlockConversion{kInt8Channel, 6, 16, 32, false};
    default: return std::nullopt;
  }
}

void decode_gguf_row(GgmlType type, const std::byte* row, int64_t k, uint8_t* codes, float* scales,
                     float* offsets) {
  const std::optional<GgmlTypeInfo> info = ggml_type_info(static_cast<uint32_t>(type));
  PAGODA_CHECK(info && gguf_block_conversion(type), "decode_gguf_row: {} is not a converted block type",
               info ? info->name : "?");
  PAGODA_CHECK(k % info->block_elems == 0, "decode_gguf_row: {} values are not whole {} blocks", k, info->name);
  const auto* src = reinterpret_cast<const uint8_t*>(row);
  for (int64_t b = 0; b < k / info->block_elems; ++b) {
    const uint8_t* block = src + b * info->block_bytes;
    uint8_t* q = codes + b * info->block_elems;
    switch (type) {
      case GgmlType::kQ4_0:  // value = (q - 8) d
        scales[b] = load_f16(block);
        decode_32(block + 2, nullptr, q);
        break;
      case GgmlType::kQ8_0:  // value = q d, q signed: as unsigned codes q + 128 with zero point 128
        scales[b] = load_f16(block);
        for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(static_cast<int8_t>(block[2 + j]) + 128);
        break;
      case GgmlType::kQ4_1:  // value = q d + m = q d - (-m)
        scales[b] = load_f16(block);
        offsets[b] = -load_f16(block + 2);
        decode_32(block + 4, nullptr, q);
        break;
      case GgmlType::kQ5_0: {  // value = (q - 16) d
        scales[b] = load_f16(block);
        const uint32_t qh = load_u32(block + 2);
        decode_32(block + 6, &qh, q);
        break;
      }
      case GgmlType::kQ5_1: {
        scales[b] = load_f16(block);
        offsets[b] = -load_f16(block + 2);
        const uint32_t qh = load_u32(block + 4);
        decode_32(block + 8, &qh, q);
        break;
      }
      case GgmlType::kQ4_K: decode_k4(block, false, q, scales + 8 * b, offsets + 8 * b); break;
      case GgmlType::kQ5_K: decode_k4(block, true, q, scales + 8 * b, offsets + 8 * b); break;
      case GgmlType::kQ6_K: decode_q6_k(block, q, scales + 16 * b); break;
      default: PAGODA_CHECK(false, "decode_gguf_row: unreachable");
    }
  }
}

}  // namespace pagoda
