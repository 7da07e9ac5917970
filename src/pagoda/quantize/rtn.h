// Round-to-nearest quantizers of one linear weight W [N, K], with the exact fp32 arithmetic of the tools
// whose formats they write (FORMATS.md; tests/data/models/quant/ were made the same way):
//   asymmetric int4 groups  AutoAWQ pseudo_quantize_tensor (zero_point): s = max(max - min, 1e-5) / 15,
//                           z = clamp(-round(min / s), 0, 15), q = clamp(round(w / s) + z, 0, 15)
//   symmetric int 4/8 bits  compressed-tensors calculate_qparams: s = absmax / ((qmax - qmin) / 2) (7.5 or
//                           127.5, min/max taken with 0), q = round(clamp(w / s, qmin, qmax))
//   FP8 e4m3 per channel    s = absmax_row / 448, code = e4m3(clamp(w / s, -448, 448)) (round to nearest even)
// Every round is half-to-even, as torch.round and numpy.rint.
#pragma once

#include <cstdint>
#include <vector>

#include "pagoda/core/dtype.h"
#include "pagoda/quantize/matrix.h"

namespace pagoda::quantizer {

struct AsymGroupCodes {
  int64_t n = 0, k = 0, group_size = 0;
  std::vector<uint8_t> codes{};  // [N, K] in [0, 15]
  std::vector<uint8_t> zeros{};  // [N, K / G] in [0, 15]
  std::vector<float> scales{};   // [N, K / G] fp32 (AutoAWQ stores them as fp16: see dequantize_awq)
};

// AutoAWQ's 4-bit zero-point quantizer; K % group_size == 0 (checked by the caller).
AsymGroupCodes quantize_asym_groups(const Matrix& w, int64_t group_size);
// (q - z) * s with the fp32 scales, in place on rows [N, K] of `w`: the fake-quantized weight AutoAWQ's
// searches evaluate.
void fake_quantize_asym_groups(float* w, int64_t n, int64_t k, int64_t group_size);
// The weight the AWQ GEMM checkpoint holds: (q - z) * fp16(s).
Matrix dequantize_awq(const AsymGroupCodes& q);

struct SymCodes {
  int bits = 8;
  int64_t n = 0, k = 0, group_size = 0;  // group_size == K: one scale per row (channel)
  std::vector<int8_t> codes{};           // [N, K] in [-2^(b-1), 2^(b-1) - 1]
  std::vector<float> scales{};           // [N, K / G], each exactly representable in the scale dtype
};

// compressed-tensors' symmetric int quantizer; group_size 0: channel. Scales are rounded to `scale_dtype`
// (the model dtype) before they divide, and a zero scale becomes that dtype's epsilon, as the library does.
SymCodes quantize_sym_int(const Matrix& w, int bits, int64_t group_size, DType scale_dtype);
Matrix dequantize_sym(const SymCodes& q);

struct Fp8Codes {
  int64_t n = 0, k = 0;
  std::vector<uint8_t> codes{};  // [N, K] float8_e4m3fn
  std::vector<float> scales{};   // [N]
};

Fp8Codes quantize_fp8_channel(const Matrix& w, DType scale_dtype);
Matrix dequantize_fp8(const Fp8Codes& q);

// x rounded to `dtype` (F32: unchanged; F16, BF16: nearest even).
float round_to_dtype(float x, DType dtype);
// numpy's finfo(dtype).eps (bf16: 2^-7), the scale compressed-tensors substitutes for 0.
float dtype_epsilon(DType dtype);

}  // namespace pagoda::quantizer
