// GGUF -> HF row order for Q/K, Q4_0 dequantisation, page pre-faulting.
#include "pagoda/loader/weight_transforms.h"

#include <cstring>

#include "pagoda/core/check.h"
#include "pagoda/core/dtype.h"

namespace pagoda {

int64_t gguf_rope_row(int64_t hf_row, int head_dim) {
  const int64_t half = head_dim / 2;
  const int64_t head = hf_row / head_dim;
  const int64_t within = hf_row % head_dim;
  const int64_t j = within / half;  // which half in HF's rotate-half layout
  const int64_t i = within % half;  // rotary pair index
  return head * head_dim + 2 * i + j;
}

void dequantize_q4_0_to_f16(const std::byte* src, uint16_t* dst, int64_t numel) {
  PAGODA_CHECK(numel % 32 == 0, "Q4_0 needs a multiple of 32 values, got {}", numel);
  // Block: f16 scale d, then 16 bytes; byte k holds value k (low nibble) and value k+16 (high nibble),
  // each stored as q + 8.
  for (int64_t b = 0; b < numel / 32; ++b) {
    const std::byte* block = src + b * 18;
    uint16_t d_bits;
    std::memcpy(&d_bits, block, 2);
    const float d = f16_to_f32(d_bits);
    const auto* qs = reinterpret_cast<const uint8_t*>(block + 2);
    uint16_t* out = dst + b * 32;
    for (int k = 0; k < 16; ++k) {
      out[k] = f32_to_f16(static_cast<float>((qs[k] & 0x0f) - 8) * d);
      out[k + 16] = f32_to_f16(static_cast<float>((qs[k] >> 4) - 8) * d);
    }
  }
}

uint64_t touch_pages(const void* data, size_t nbytes) {
  constexpr size_t kPage = 4096;
  const auto* p = static_cast<const volatile unsigned char*>(data);
  uint64_t sum = 0;
  for (size_t off = 0; off < nbytes; off += kPage) sum += p[off];
  if (nbytes > 0) sum += p[nbytes - 1];
  return sum;
}

}  // namespace pagoda
