// GGML tensor types as GGUF files store them, and the block decoders of the quantized ones Pagoda converts
// at load (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the k-quants Q4_K, Q5_K, Q6_K) into the internal kinds of
// core/quant_scheme.h. Each decoder turns one row of blocks into unsigned codes (one per value, in k order),
// a scale per group and, for GGML's "scale and min" types, an offset per group, so that
//   value = (q - zero_point) * scale         (Q4_0, Q5_0, Q6_K, Q8_0: a fixed zero point per type)
//   value = q * scale - offset               (Q4_1, Q5_1: offset = -m; Q4_K, Q5_K: offset = dmin * m_sub)
// with scale and offset computed in fp32 as llama.cpp's dequantize_row_* computes them, so the values are
// the same as llama.cpp's bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pagoda/core/dtype.h"
#include "pagoda/core/quant_scheme.h"

namespace pagoda {

// ggml.h's enum ggml_type (the ids GGUF tensor infos hold). Only the ids Pagoda names are listed.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
};

// What Pagoda knows of one GGML type.
struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;     // as llama.cpp prints it ("Q4_K"); static storage
  int64_t block_elems = 0;   // values per block along a row (1 for plain types); 0 when Pagoda does not load it
  int64_t block_bytes = 0;   // bytes per block
  bool loadable() const { return block_elems > 0; }
};

// The info of type id `id`, or nullopt for an id ggml.h does not define.
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id);
// The info of the type called `name` ("Q4_K"), or nullopt.
std::optional<GgmlTypeInfo> ggml_type_by_name(std::string_view name);
// The types Pagoda loads, for error messages: "F32, F16, BF16, Q4_0, ...".
std::string ggml_loadable_type_names();
// F32, F16 and BF16.
bool ggml_type_is_float(GgmlType type);
// The Pagoda dtype that names the bytes of `type` (F32, F16, BF16, Q8_0, Q4_0), or nullopt for the block
// types Pagoda has no dtype for (only their decoders read them).
std::optional<DType> ggml_type_dtype(GgmlType type);

// How a block type becomes an internal kind (core/quant_scheme.h).
struct GgufBlockConversion {
  QuantScheme scheme;      // kInt4Group (4-bit codes) or kInt8Channel (5- and 6-bit codes, one per byte)
  int bits;                // 4, 5 or 6: codes are in [0, 2^bits)
  int64_t group_size;      // values per scale: 32, or 16 for Q6_K
  int zero_point;          // value = (q - zero_point) * s; unused when `offsets`
  bool offsets;            // value = q * s - offset
};
// The conversion of `type`, or nullopt for the types used as stored (F32, F16, BF16, Q8_0) and those Pagoda
// does not load.
std::optional<GgufBlockConversion> gguf_block_conversion(GgmlType type);

// Decodes one row of `k` values (k a multiple of the type's block size) of block type `type` (one with a
// gguf_block_conversion) from `row`:
//   codes   [k]          unsigned codes, in k order
//   scales  [k / group]  fp32
//   offsets [k / group]  fp32, written only for the offset types (may be null otherwise)
void decode_gguf_row(GgmlType type, const std::byte* row, int64_t k, uint8_t* codes, float* scales, float* offsets);

}  // namespace pagoda
