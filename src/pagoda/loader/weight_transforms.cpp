// GGUF -> HF row order for Q/K, page pre-faulting.
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

uint64_t touch_pages(const void* data, size_t nbytes) {
  constexpr size_t kPage = 4096;
  const auto* p = static_cast<const volatile unsigned char*>(data);
  uint64_t sum = 0;
  for (size_t off = 0; off < nbytes; off += kPage) sum += p[off];
  if (nbytes > 0) sum += p[nbytes - 1];
  return sum;
}

}  // namespace pagoda
