// The FP8 KV cache's number format (KvCacheSpec::dtype == kF8E4M3): every (token, KV head) row of K and of V
// holds head_dim e4m3 codes and one power-of-two scale 2^e, e an int8 exponent stored beside the block:
//   e     = the smallest integer with 448 * 2^e >= amax(|row|), within [-126, 63] (amax 0:
//           kFp8KvZeroExponent), so that the GPU kernels' factors 2^e, 2^(e + 56) are normal floats
//   code  = e4m3(x * 2^-e), round to nearest even, saturating (only rows beyond 448 * 2^63 = 4.1e21 do)
//   value = e4m3_to_f32(code) * 2^e  (exact)
// A scale per token and head is finer than any peer's (vLLM, SGLang, TensorRT-LLM: one per tensor; vLLM's
// FA3 path one per head) and than one per (block, head): a token is quantized once, when it is written,
// and never again as its block fills. Power-of-two scales make the scaling exact, cost one byte a row
// (the pool holds 2 * 128 / (2 * 129) = 1.98x bf16's tokens at head_dim 128) and are what the backends
// share bit for bit. Only e4m3's rounding is lost: values keep 3 mantissa bits, and those below amax / 2^15
// (e4m3's subnormals at the scale) fewer.
#pragma once

#include <cstdint>

namespace pagoda {

constexpr int8_t kFp8KvZeroExponent = -126;
constexpr int kFp8KvMaxExponent = 63;

// The exponent e of a row whose largest magnitude is amax (finite, >= 0).
int8_t fp8_kv_exponent(float amax);

// x [n] -> codes [n] and the row's exponent.
int8_t quantize_fp8_kv_row(const float* x, int n, uint8_t* codes);
// x [n] -> codes [n] at a given exponent e (values beyond 448 * 2^e saturate): the per-layer scales of
// --calculate-kv-scales, stored in every row's exponent so that attention reads them as it reads its own.
void quantize_fp8_kv_row_at(const float* x, int n, int8_t e, uint8_t* codes);
// codes [n] with exponent e -> out [n].
void dequantize_fp8_kv_row(const uint8_t* codes, int8_t e, int n, float* out);

}  // namespace pagoda
