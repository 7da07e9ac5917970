// How a kernel reads an FP8 W8A8 product that carries its scales (ProductScales, elementwise.h; the GEMV's own
// epilogue and the scaling pass, fp8_linear.cu): one place for the order of the two fp32 multiplications, so that
// every reader gives the same value as the scaling pass followed by the plain kernel.
#pragma once

namespace pagoda::kernels {

// The FP8 GEMM's sum for output channel n of token t, scaled: (sum * s_w[n]) * s_x[t], in fp32.
__device__ __forceinline__ float scaled_sum(float sum, float row_scale, float token_scale) {
  return sum * row_scale * token_scale;
}

}  // namespace pagoda::kernels
