// Skinny GEMM for decode: out [T, N] = x [T, K] · w [N, K]^T with T <= kSkinnyGemmMaxTokens, bf16 in and
// out, fp32 accumulation. Memory-bound: every weight byte is read once per call with 16-byte loads, so a
// batch-1 decode step runs near the HBM roofline. Larger T goes to cuBLAS. Two variants apply the next
// elementwise step in their epilogue: SwiGLU (skinny_gemm_silu) and RoPE + KV store (skinny_gemm_qkv_rope).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace pagoda::kernels {

constexpr int kSkinnyGemmMaxTokens = 8;

// Whether skinny_gemm supports this shape (K a multiple of 8, pointers 16-byte aligned, T in range).
bool skinny_gemm_supported(const void* x, const void* w, int num_tokens, int n, int k);

void skinny_gemm(__nv_bfloat16* out, const __nv_bfloat16* x, const __nv_bfloat16* w, int num_tokens, int n, int k,
                 cudaStream_t stream);

// The gate-up GEMM of a SwiGLU MLP with its activation: out [T, I] = silu(x · gate^T) * (x · up^T), where
// w_gate_up [2I, K] interleaves the two matrices by rows (row 2j = gate_j, row 2j + 1 = up_j; see
// silu_mul_interleaved for the cuBLAS path). Each product is rounded to bf16 before the activation, as
// in the unfused sequence. Same support rule as skinny_gemm with n = 2I.
void skinny_gemm_silu(__nv_bfloat16* out, const __nv_bfloat16* x, const __nv_bfloat16* w_gate_up, int num_tokens,
                      int intermediate, int k, cudaStream_t stream);

// What a decode GEMM does with each output row, or pair of rows (gemm_epilogue.cuh).
enum class Epilogue {
  kPlain,  // out [T, N] = the products, rounded to bf16
  kSilu,   // rows 2j, 2j + 1 = gate_j, up_j: out [T, N / 2] = silu_pair
  kRope,   // QKV with Q/K rows paired (qkv_rope_pairs): RoPE, then q_out and the KV cache (QkvRopeOutput)
};

// Where the QKV GEMM with RoPE (skinny_gemm_qkv_rope) puts its results; the arrays as for qkv_rope_store.
struct QkvRopeOutput {
  __nv_bfloat16* q_out = nullptr;    // [T, num_heads, head_dim], rotated
  __nv_bfloat16* k_cache = nullptr;  // [slots, num_kv_heads, head_dim]: rotated K at slot_mapping[t]
  __nv_bfloat16* v_cache = nullptr;  // [slots, num_kv_heads, head_dim]: V at slot_mapping[t]
  const int* positions = nullptr;     // [T]
  const int* slot_mapping = nullptr;  // [T]; < 0: a padding token, nothing cached
  const float* inv_freq = nullptr;    // [head_dim / 2]
  float scaling = 1.0f;
  int num_heads = 0, num_kv_heads = 0, head_dim = 0;
};

// The QKV projection of a decode step with RoPE and the KV-cache store in its epilogue (no qkv tensor, no
// second kernel): w_qkv [(nh + 2 nkv) * hd, K] stacks Q, K, V with the rows of every Q and K head in
// qkv_rope_pairs order (row 2i = element i, row 2i + 1 = element i + hd / 2). Same results, bit for bit,
// as skinny_gemm into qkv followed by qkv_rope_store. Same support rule as skinny_gemm.
void skinny_gemm_qkv_rope(const QkvRopeOutput& out, const __nv_bfloat16* x, const __nv_bfloat16* w_qkv,
                          int num_tokens, int k, cudaStream_t stream);

}  // namespace pagoda::kernels
