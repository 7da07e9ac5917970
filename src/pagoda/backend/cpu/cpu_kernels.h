// The CPU backend's kernels as plain functions over raw pointers, so they can be tested and timed
// one by one. Activations are fp32; weights F32, F16 or BF16 (quantized ones: linear_quant.h).
#pragma once

#include <cstdint>
#include <functional>

#include "pagoda/backend/forward_batch.h"
#include "pagoda/backend/ops.h"
#include "pagoda/core/dtype.h"
#include "pagoda/kv/kv_cache.h"

namespace pagoda::cpu {

// out[k] = row[k] as fp32 for k in [0, num_cols). `row` points at the start of a row of `dtype`.
void dequantize_row(const void* row, DType dtype, int64_t num_cols, float* out);

// out [num_tokens, n] = x [num_tokens, k] · w [n, k]^T, w of any weight dtype. OpenMP over rows of w.
void linear_f32(float* out, const float* x, int64_t num_tokens, const void* w, DType w_dtype, int64_t n, int64_t k);
// The fp32 product over weight rows that `rows_of(r0, nr, scratch)` provides a chunk at a time (up to 16
// rows [nr, k], written into scratch or pointing elsewhere): every weight format that converts rows to
// fp32 shares this loop and its micro-kernel, so results never depend on the batch.
using RowChunkSource = std::function<const float*(int64_t r0, int64_t nr, float* scratch)>;
void linear_by_row_chunks(float* out, const float* x, int64_t num_tokens, int64_t n, int64_t k,
                          const RowChunkSource& rows_of);

void rms_norm_f32(float* out, const float* x, const float* weight, int64_t num_rows, int64_t dim, float eps);

// Rotate-half RoPE in place on x [num_tokens, num_heads, head_dim].
void rope_f32(float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads, int64_t head_dim,
              const float* inv_freq);

// Causal paged attention: out, q [num_tokens, num_heads, head_dim]; K/V cache layer tensors
// [num_blocks, block_size, num_kv_heads, head_dim] fp32.
void paged_attention_f32(float* out, const float* q, const float* k_cache, const float* v_cache,
                         const KvCacheSpec& spec, int num_heads, const ForwardBatch& batch, float scale);
// The same over an fp16 cache (--kv-cache-dtype fp16, llama.cpp's default): products of fp16 inputs summed in
// fp32, as llama.cpp's CPU attention computes them: the queries are rounded to fp16 before q.k, the softmax
// probabilities before p.v.
void paged_attention_f16(float* out, const float* q, const uint16_t* k_cache, const uint16_t* v_cache,
                         const KvCacheSpec& spec, int num_heads, const ForwardBatch& batch, float scale);

}  // namespace pagoda::cpu
