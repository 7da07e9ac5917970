// An FP8 W8A8 linear's input as e4m3 codes with one scale per token (fp8_linear.h's quantize_fp8_rows, and the
// RMSNorm kernels that quantize the row they normalise: elementwise.h): the same bits wherever it is done.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

namespace pagoda::kernels {

constexpr float kFp8ActivationMax = 448.0f;
constexpr float kMinFp8ActivationScale = 1.0f / (448.0f * 512.0f);  // cpu::kMinFp8ActivationScale

// A row's scale from its largest |value|: max(amax / 448, 1 / (448 * 512)), as cpu::quantize_activations_fp8.
__device__ __forceinline__ float fp8_activation_scale(float amax) {
  return fmaxf(__fdiv_rn(amax, kFp8ActivationMax), kMinFp8ActivationScale);
}

// e4m3(v * inv), inv = 1 / scale rounded once (vLLM's quantizers multiply by the reciprocal too); saturating.
__device__ __forceinline__ uint32_t fp8_activation_code(float v, float inv) {
  return __nv_cvt_float_to_fp8(__fmul_rn(v, inv), __NV_SATFINITE, __NV_E4M3);
}

}  // namespace pagoda::kernels
