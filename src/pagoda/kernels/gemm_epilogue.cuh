// The epilogues the decode GEMMs share (gemv.cu for bf16 weights, quant_gemv.cu for quantized ones): what
// happens to an output row, or a pair of rows (2j, 2j + 1), once its dot products are summed. One contract
// for the row orders of the fused weights (backend/cuda/weight_upload.cpp): gate-up interleaved by rows, Q
// and K heads in RoPE pairs.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "pagoda/kernels/activation.cuh"
#include "pagoda/kernels/gemv.h"
#include "pagoda/kernels/rope_pair.cuh"

namespace pagoda::kernels {
namespace {

using bf16 = __nv_bfloat16;

// The SwiGLU epilogue: bf16(silu(g) * u) of the two products rounded to bf16, exactly what a bf16 GEMM
// followed by silu_mul computes.
__device__ __forceinline__ bf16 silu_pair(float gate, float up) {
  return __float2bfloat16(swiglu(__bfloat162float(__float2bfloat16(gate)), __bfloat162float(__float2bfloat16(up))));
}

// Rows `row`, `row` + 1 (row even) of token t, products a0, a1 rounded to bf16 as a GEMM output would be.
// Q and K rows come in pairs (element i, element i + head_dim / 2 of a head): rotated as qkv_rope_store
// rotates them, then stored to q_out or the cache slot of the token. V rows go to the cache as they are.
__device__ __forceinline__ void store_rope_pair(const QkvRopeOutput& o, int t, int row, float a0, float a1) {
  const float x0 = __bfloat162float(__float2bfloat16(a0)), x1 = __bfloat162float(__float2bfloat16(a1));
  const int hd = o.head_dim, q_rows = o.num_heads * hd, k_rows = o.num_kv_heads * hd;
  const int64_t slot = o.slot_mapping[t];
  if (row >= q_rows + k_rows) {  // V: rows d, d + 1 of a head
    if (slot < 0) return;
    const int v = row - q_rows - k_rows;
    bf16* dst = o.v_cache + (slot * o.num_kv_heads + v / hd) * hd + v % hd;
    dst[0] = __float2bfloat16(x0);
    dst[1] = __float2bfloat16(x1);
    return;
  }
  const bool is_q = row < q_rows;
  const int base = is_q ? row : row - q_rows;
  const int head = base / hd, i = (base % hd) / 2;
  bf16* dst;
  if (is_q) {
    dst = o.q_out + (static_cast<int64_t>(t) * o.num_heads + head) * hd;
  } else {
    if (slot < 0) return;
    dst = o.k_cache + (slot * o.num_kv_heads + head) * hd;
  }
  float o0, o1;
  rope_rotate_pair(x0, x1, o.positions[t], o.inv_freq[i], o.scaling, &o0, &o1);
  dst[i] = __float2bfloat16(o0);
  dst[i + hd / 2] = __float2bfloat16(o1);
}

// Stores the result of rows `row` (and `row` + 1 for the pair epilogues) of token t.
template <Epilogue E>
__device__ __forceinline__ void store_rows(bf16* out, const QkvRopeOutput& rope, int n, int t, int row, float a0,
                                           float a1) {
  if constexpr (E == Epilogue::kPlain) {
    if (row < n) out[static_cast<int64_t>(t) * n + row] = __float2bfloat16(a0);
  } else if constexpr (E == Epilogue::kSilu) {
    if (row + 1 < n) out[static_cast<int64_t>(t) * (n / 2) + row / 2] = silu_pair(a0, a1);
  } else {
    if (row + 1 < n) store_rope_pair(rope, t, row, a0, a1);
  }
}

}  // namespace
}  // namespace pagoda::kernels
