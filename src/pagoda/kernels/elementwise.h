// Elementwise and row-wise kernels of the Llama forward pass: bf16 in and out, fp32 arithmetic. Shapes are
// row-major; every launcher checks its launch. Semantics mirror the CPU reference ops
// (backend/cpu/elementwise.cpp) and Hugging Face's bf16 rounding points where noted.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "pagoda/kernels/fp8_linear.h"

namespace pagoda::kernels {

using bf16 = __nv_bfloat16;

// out [T, H] = table [vocab, H] rows ids [T].
void embedding(bf16* out, const int32_t* ids, const bf16* table, int num_tokens, int hidden, cudaStream_t stream);

// out [R, H] = rms_norm(x) * w: fp32 sum of squares; x * rsqrt(mean + eps) rounded to bf16, then times w
// (rounded), as transformers' LlamaRMSNorm does in bf16.
// With `quantized` (elementwise.cu's rms_norm_kernel): also out as an FP8 W8A8 linear's dynamic per-token input,
// the codes and scales quantize_fp8_rows(out) would give (fp8_linear.h), in the same kernel.
// With `order` [H] (a norm feeding an act-order linear, Weight::output_order; hidden <= 24,576, not with
// `quantized`): out[r, j] = the normed row's column order[j], the linear's input gathered in the same launch.
void rms_norm(bf16* out, const bf16* x, const bf16* w, int rows, int hidden, float eps, cudaStream_t stream,
              Fp8Activations quantized = {}, const int32_t* order = nullptr);

// The per-row and per-token scales of an FP8 W8A8 GEMM's unscaled sums (cuBLASLt has no outer-vector scales on
// sm_90: fp8_linear.h), applied by the kernel that reads them: value = float(sum) * rows[n] * tokens[t]. Null
// rows: the input is already scaled.
struct ProductScales {
  const float* rows = nullptr;    // [N] the weight's output-channel scales, in the input's column order
  const float* tokens = nullptr;  // [T] the activations' per-token scales
};

// residual [R, H] += x (stored rounded to bf16); out = rms_norm(residual) * w. One pass per row.
// With `scales`, x holds unscaled FP8 sums (ProductScales), each scaled and rounded to bf16 as the scaling pass
// would have stored it before the addition: the same bits as scale_fp8_products followed by add_rms_norm.
// `order` as rms_norm's: out only (the residual keeps its order).
void add_rms_norm(bf16* residual, const bf16* x, bf16* out, const bf16* w, int rows, int hidden, float eps,
                  cudaStream_t stream, ProductScales scales = {}, Fp8Activations quantized = {},
                  const int32_t* order = nullptr);

// Rotate-half RoPE in place on q [T, nh, hd] and k [T, nkv, hd]: for i < hd/2, angle = positions[t] *
// inv_freq[i] (fp32), c = cos(angle) * scaling, s = sin(angle) * scaling,
//   x[i] = x[i] c - x[i + hd/2] s,  x[i + hd/2] = x[i + hd/2] c + x[i] s.
// inv_freq: [hd / 2] fp32 on the device.
void rope(bf16* q, bf16* k, const int32_t* positions, const float* inv_freq, float scaling, int num_tokens,
          int num_heads, int num_kv_heads, int head_dim, cudaStream_t stream);

// k, v [T, nkv, hd] into k_cache, v_cache [num_blocks, block_size, nkv, hd] at row slot_mapping[t]
// (slot = block * block_size + offset; slot < 0: skipped, a padding token).
void store_kv(bf16* k_cache, bf16* v_cache, const bf16* k, const bf16* v, const int32_t* slot_mapping,
              int num_tokens, int num_kv_heads, int head_dim, cudaStream_t stream);

// The fused QKV path: qkv [T, nh + 2 nkv, hd] (one GEMM's output; heads q..., k..., v...), each Q and K
// head in rope-pair order (element i at 2i, element i + hd/2 at 2i + 1: the CUDA backend's row order of the
// fused weight, see skinny_gemm_qkv_rope). Writes q_out [T, nh, hd] = rope(q) in the usual order; K =
// rope(k) and V into the caches at slot_mapping (as store_kv). One launch.
// With `scales`, qkv holds unscaled FP8 sums (ProductScales).
void qkv_rope_store(bf16* q_out, const bf16* qkv, bf16* k_cache, bf16* v_cache, const int32_t* positions,
                    const int32_t* slot_mapping, const float* inv_freq, float scaling, int num_tokens, int num_heads,
                    int num_kv_heads, int head_dim, cudaStream_t stream, ProductScales scales = {});

// out [n] = silu(gate) * up (silu in fp32; the product rounded once).
void silu_mul(bf16* out, const bf16* gate, const bf16* up, int64_t n, cudaStream_t stream);

// out [R, I] = silu(gate_up[:, 2j]) * gate_up[:, 2j + 1] for gate_up [R, 2I]: the output of the fused
// gate-up GEMM, whose weight interleaves gate and up rows (skinny_gemm_silu does both steps for T <= 8). With
// `scales`, gate_up holds unscaled FP8 sums (ProductScales).
void silu_mul_interleaved(bf16* out, const bf16* gate_up, int rows, int intermediate, cudaStream_t stream,
                          ProductScales scales = {});

// out [R, C] = x[rows[r], :] for x [*, C].
void gather_rows(bf16* out, const bf16* x, const int32_t* rows, int num_rows, int row_elems, cudaStream_t stream);
// out [R, C] with out[r, j] = x[r, columns[j]] for x [R, C]: the input of an act-order linear whose columns
// were sorted by group (backend/cpu/act_order.h); out and x do not overlap. The kernel launched next must read
// only weights before its PDL wait (launch.cuh: it is scheduled before this one waits): launch a linear next.
void gather_columns(bf16* out, const bf16* x, const int32_t* columns, int rows, int cols, cudaStream_t stream);

// Conversions (weights at upload, logits for the host).
void bf16_to_f32(float* out, const bf16* x, int64_t n, cudaStream_t stream);
void f32_to_bf16(bf16* out, const float* x, int64_t n, cudaStream_t stream);
void f16_to_bf16(bf16* out, const __half* x, int64_t n, cudaStream_t stream);

// Fills n values with a seeded pseudo-normal N(0, stddev) (or the constant `value` when stddev == 0): dummy
// weights made on the device, so an 8B speed run needs no host copy.
void fill_random(bf16* out, int64_t n, uint64_t seed, float stddev, float value, cudaStream_t stream);

}  // namespace pagoda::kernels
