// Weight rows of every stored dtype to fp32: the one place the CPU backend reads weight bytes.
#include <immintrin.h>

#include <cstring>

#include "pagoda/backend/cpu/cpu_kernels.h"
#include "pagoda/core/check.h"

namespace pagoda::cpu {
namespace {

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

}  // namespace

void dequantize_row(const void* row, DType dtype, int64_t num_cols, float* out) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(out, row, static_cast<size_t>(num_cols) * 4);
      return;
    case DType::kBF16: {
      const auto* src = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < num_cols; ++i) out[i] = bf16_to_f32(src[i]);
      return;
    }
    case DType::kF16: {
      const auto* src = static_cast<const uint16_t*>(row);
      int64_t i = 0;
#ifdef __F16C__
      for (; i + 8 <= num_cols; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
      }
#endif
      for (; i < num_cols; ++i) out[i] = f16_to_f32(src[i]);
      return;
    }
    case DType::kQ8_0: {  // blocks of {f16 scale, int8 q[32]}
      const auto* block = static_cast<const uint8_t*>(row);
      for (int64_t b = 0; b < num_cols / 32; ++b, block += 34) {
        const float d = f16_to_f32(load_u16(block));
        const auto* q = reinterpret_cast<const int8_t*>(block + 2);
        for (int j = 0; j < 32; ++j) out[b * 32 + j] = d * static_cast<float>(q[j]);
      }
      return;
    }
    case DType::kQ4_0: {  // blocks of {f16 scale, 16 bytes: low nibbles = values 0..15, high = 16..31}
      const auto* block = static_cast<const uint8_t*>(row);
      for (int64_t b = 0; b < num_cols / 32; ++b, block += 18) {
        const float d = f16_to_f32(load_u16(block));
        const uint8_t* q = block + 2;
        for (int j = 0; j < 16; ++j) {
          out[b * 32 + j] = d * static_cast<float>((q[j] & 0x0f) - 8);
          out[b * 32 + j + 16] = d * static_cast<float>((q[j] >> 4) - 8);
        }
      }
      return;
    }
    default:
      PAGODA_CHECK(false, "dequantize_row: unsupported weight dtype {}", dtype_name(dtype));
  }
}

}  // namespace pagoda::cpu
