// Weight rows of every stored dtype to fp32: the one place the CPU backend reads weight bytes.
#include <immintrin.h>

#include <cstring>

#include "pagoda/backend/cpu/cpu_kernels.h"
#include "pagoda/core/check.h"

namespace pagoda::cpu {
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
    default:
      PAGODA_CHECK(false, "dequantize_row: unsupported weight dtype {}", dtype_name(dtype));
  }
}

}  // namespace pagoda::cpu
