// Activation functions shared by the elementwise kernels and the GEMM epilogues, in fp32.
#pragma once

namespace pagoda::kernels {

// SwiGLU's gate: silu(g) * u = g / (1 + e^-g) * u.
__device__ __forceinline__ float swiglu(float g, float u) { return g / (1.0f + expf(-g)) * u; }

}  // namespace pagoda::kernels
