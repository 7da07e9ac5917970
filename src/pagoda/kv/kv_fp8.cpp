// The FP8 KV row format (kv_fp8.h).
#include "pagoda/kv/kv_fp8.h"

#include <algorithm>
#include <cmath>

#include "pagoda/core/dtype.h"

namespace pagoda {

int8_t fp8_kv_exponent(float amax) {
  if (!(amax > 0.0f)) return kFp8KvZeroExponent;
  int e = 0;
  const float m = std::frexp(amax / 448.0f, &e);  // amax / 448 = m * 2^e, m in [0.5, 1): 2^e >= amax / 448
  if (m == 0.5f) --e;                               // a power of two: 2^(e - 1) is exactly enough
  // amax / 448 is rounded: step up where that made 448 * 2^e fall short of amax.
  if (std::ldexp(448.0f, e) < amax) ++e;
  return static_cast<int8_t>(std::clamp(e, -126, kFp8KvMaxExponent));
}

int8_t quantize_fp8_kv_row(const float* x, int n, uint8_t* codes) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const int8_t e = fp8_kv_exponent(amax);
  quantize_fp8_kv_row_at(x, n, e, codes);
  return e;
}

void quantize_fp8_kv_row_at(const float* x, int n, int8_t e, uint8_t* codes) {
  for (int i = 0; i < n; ++i) codes[i] = f32_to_e4m3_saturating(std::ldexp(x[i], -e));
}

void dequantize_fp8_kv_row(const uint8_t* codes, int8_t e, int n, float* out) {
  for (int i = 0; i < n; ++i) out[i] = std::ldexp(f8e4m3_to_f32(codes[i]), e);
}

}  // namespace pagoda
