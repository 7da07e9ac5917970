// The rotation of one RoPE pair (and the launch shape), shared by qkv_rope_store (elementwise.cu) and the QKV GEMM's epilogue
// (gemv.cu) so that both give the same bits: explicit roundings, no contraction into FMAs.
#pragma once

namespace pagoda::kernels {

// The rotation of pair i at `position`: (cos, sin) of the fp32 angle position * inv_freq[i], times scaling.
__device__ __forceinline__ float2 rope_cos_sin(int position, float inv_freq, float scaling) {
  float s, c;
  sincosf(__fmul_rn(static_cast<float>(position), inv_freq), &s, &c);
  return make_float2(__fmul_rn(c, scaling), __fmul_rn(s, scaling));
}

// (x0, x1) = (element i, element i + head_dim / 2) of a head, rotated by rope_cos_sin's (c, s).
__device__ __forceinline__ void rope_apply(float x0, float x1, float2 cs, float* out0, float* out1) {
  *out0 = __fsub_rn(__fmul_rn(x0, cs.x), __fmul_rn(x1, cs.y));
  *out1 = __fadd_rn(__fmul_rn(x1, cs.x), __fmul_rn(x0, cs.y));
}

// Both at once; scaling as RopeParams'.
__device__ __forceinline__ void rope_rotate_pair(float x0, float x1, int position, float inv_freq, float scaling,
                                                 float* out0, float* out1) {
  rope_apply(x0, x1, rope_cos_sin(position, inv_freq, scaling), out0, out1);
}

// The QKV RoPE/store kernels' grid: (tokens, head groups) of blocks whose `rows` warp rows take one head each in turn.
// Enough head groups that a decode step of a few tokens still spreads over the SMs (one block a token took a batch-1
// step's 48 heads through one SM); one group a token once the tokens alone fill them (a block per (token, head) made a
// 2,048-token prefill step's launch take 120 us on an H100, bound by how fast the SMs take blocks).
inline dim3 qkv_rope_grid(int num_tokens, int heads, int rows) {
  constexpr int kEnoughBlocks = 1024;  // ~8 per SM of an H100 / H200
  const int groups_for_heads = (heads + rows - 1) / rows;
  const int groups_for_sms = (kEnoughBlocks + num_tokens - 1) / num_tokens;
  const int groups = groups_for_heads < groups_for_sms ? groups_for_heads : groups_for_sms;
  return dim3(static_cast<unsigned>(num_tokens), static_cast<unsigned>(groups > 0 ? groups : 1));
}

}  // namespace pagoda::kernels
