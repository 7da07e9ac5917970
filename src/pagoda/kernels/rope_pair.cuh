// The rotation of one RoPE pair, shared by qkv_rope_store (elementwise.cu) and the QKV GEMM's epilogue
// (gemv.cu) so that both give the same bits: explicit roundings, no contraction into FMAs.
#pragma once

namespace pagoda::kernels {

// (x0, x1) = (element i, element i + head_dim / 2) of a head at `position`; scaling as RopeParams'.
__device__ __forceinline__ void rope_rotate_pair(float x0, float x1, int position, float inv_freq, float scaling,
                                                 float* out0, float* out1) {
  float s, c;
  sincosf(__fmul_rn(static_cast<float>(position), inv_freq), &s, &c);
  c = __fmul_rn(c, scaling);
  s = __fmul_rn(s, scaling);
  *out0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  *out1 = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
}

}  // namespace pagoda::kernels
