// Writing the FP8 KV cache (kv/kv_fp8.h): each (token, KV head) row of K and V becomes head_dim e4m3 codes
// and one power-of-two exponent, computed from the row's largest magnitude when the row is written. The
// bf16 store kernels' counterparts (elementwise.h: store_kv, qkv_rope_store): the same values, rounded to
// bf16 as those kernels store them, then quantized exactly as the CPU reference quantizes (bit for bit).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "pagoda/kernels/elementwise.h"

namespace pagoda::kernels {

// One layer's FP8 cache: codes [num_blocks, block_size, nkv, hd], exponents [num_blocks, nkv, block_size].
struct Fp8KvLayer {
  uint8_t* k_codes = nullptr;
  uint8_t* v_codes = nullptr;
  int8_t* k_exp = nullptr;
  int8_t* v_exp = nullptr;
  int num_kv_heads = 0, head_dim = 0, block_size = 0;
};

// k, v [T, nkv, hd] into the rows of slot_mapping[t] (slot < 0: a padding token, skipped).
void store_kv_fp8(const Fp8KvLayer& cache, const __nv_bfloat16* k, const __nv_bfloat16* v,
                  const int32_t* slot_mapping, int num_tokens, cudaStream_t stream);

// qkv_rope_store (elementwise.h) with an FP8 cache: q_out [T, nh, hd] = rope(q); rope(k) and v quantized
// into the cache rows of slot_mapping.
// With `scales`, qkv holds unscaled FP8 sums (ProductScales): V is the scaled value rounded to bf16, as the bf16
// kernel stores it.
void qkv_rope_store_fp8(__nv_bfloat16* q_out, const __nv_bfloat16* qkv, const Fp8KvLayer& cache,
                        const int32_t* positions, const int32_t* slot_mapping, const float* inv_freq, float scaling,
                        int num_tokens, int num_heads, cudaStream_t stream, ProductScales scales = {});

}  // namespace pagoda::kernels
