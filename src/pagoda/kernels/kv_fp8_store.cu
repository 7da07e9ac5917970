// FP8 KV store kernels (contract: kv_fp8_store.h; number format: kv/kv_fp8.h). One block per (token, head
// row), ceil(hd / 2 / 32) warps; thread i holds elements i and i + hd / 2 (the RoPE pair), the block
// reduces the row's amax, and each thread writes its two codes.
#include "pagoda/kernels/kv_fp8_store.h"

#include <cuda_fp8.h>

#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/launch.cuh"
#include "pagoda/kernels/rope_pair.cuh"

namespace pagoda::kernels {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kMaxWarps = 4;  // head_dim <= 256

// kv_fp8.cpp's fp8_kv_exponent: the smallest e in [-126, 63] with 448 * 2^e >= amax (the same
// IEEE operations: frexpf / ldexpf are exact, the division correctly rounded).
__device__ __forceinline__ int fp8_kv_exponent(float amax) {
  if (!(amax > 0.0f)) return -126;
  int e = 0;
  const float m = frexpf(__fdiv_rn(amax, 448.0f), &e);
  if (m == 0.5f) --e;
  if (ldexpf(448.0f, e) < amax) ++e;
  return min(max(e, -126), 63);  // kv_fp8.h: kFp8KvMaxExponent
}

// Block-wide: quantizes the row whose elements i and i + half thread i holds (x0, x1; threads with
// i >= half hold nothing) into codes[0, 2 half) and *exponent. Every thread of the block calls it.
__device__ __forceinline__ void store_fp8_row(uint8_t* codes, int8_t* exponent, float x0, float x1, int i, int half) {
  __shared__ float warp_max[kMaxWarps];
  const bool active = i < half;
  float amax = active ? fmaxf(fabsf(x0), fabsf(x1)) : 0.0f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
  if (threadIdx.x % 32 == 0) warp_max[warp] = amax;
  __syncthreads();
  amax = warp_max[0];
  for (int w = 1; w < warps; ++w) amax = fmaxf(amax, warp_max[w]);
  const int e = fp8_kv_exponent(amax);
  if (active) {
    const float inv = __int_as_float((127 - e) << 23);  // 2^-e, a normal float for e in [-126, 63]
    codes[i] = __nv_cvt_float_to_fp8(x0 * inv, __NV_SATFINITE, __NV_E4M3);
    codes[i + half] = __nv_cvt_float_to_fp8(x1 * inv, __NV_SATFINITE, __NV_E4M3);
  }
  if (threadIdx.x == 0) *exponent = static_cast<int8_t>(e);
}

__device__ __forceinline__ float round_bf16(float x) { return __bfloat162float(__float2bfloat16(x)); }

struct Fp8Row {
  uint8_t* codes;
  int8_t* exponent;
};
__device__ __forceinline__ Fp8Row fp8_row(const Fp8KvLayer& c, bool is_v, int64_t slot, int head) {
  const int64_t row = slot * c.num_kv_heads + head;
  const int64_t e = ((slot / c.block_size) * c.num_kv_heads + head) * c.block_size + slot % c.block_size;
  return {(is_v ? c.v_codes : c.k_codes) + row * c.head_dim, (is_v ? c.v_exp : c.k_exp) + e};
}

// grid = (T, nkv, 2: K then V).
__global__ void store_kv_fp8_kernel(const Fp8KvLayer c, const bf16* k, const bf16* v, const int32_t* slot_mapping) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  const int64_t t = blockIdx.x;
  const int head = blockIdx.y;
  const bool is_v = blockIdx.z == 1;
  const int64_t slot = slot_mapping[t];
  if (slot < 0) return;  // uniform over the block
  const int half = c.head_dim / 2, i = threadIdx.x;
  const bf16* src = (is_v ? v : k) + (t * c.num_kv_heads + head) * c.head_dim;
  const float x0 = i < half ? __bfloat162float(src[i]) : 0.0f;
  const float x1 = i < half ? __bfloat162float(src[i + half]) : 0.0f;
  const Fp8Row dst = fp8_row(c, is_v, slot, head);
  store_fp8_row(dst.codes, dst.exponent, x0, x1, i, half);
}

// grid = (T, nh + 2 nkv): as qkv_rope_store_kernel (elementwise.cu), K and V rows into the FP8 cache.
__global__ void qkv_rope_store_fp8_kernel(bf16* q_out, const bf16* qkv, const Fp8KvLayer c, const int32_t* positions,
                                          const int32_t* slot_mapping, const float* inv_freq, float scaling,
                                          int num_heads, ProductScales scales) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  const int64_t t = blockIdx.x;
  const int h = blockIdx.y, nkv = c.num_kv_heads, hd = c.head_dim, half = hd / 2, i = threadIdx.x;
  const int64_t slot = slot_mapping[t];
  const bf16* src = qkv + (t * (num_heads + 2 * nkv) + h) * hd;
  // Element j of this head: as stored, or the FP8 GEMM's sum times its row's scale and the token's.
  const float* row_scales = scales.rows != nullptr ? scales.rows + static_cast<int64_t>(h) * hd : nullptr;
  const float token_scale = scales.rows != nullptr ? scales.tokens[t] : 1.0f;
  const auto value = [&](int j) {
    const float v = __bfloat162float(src[j]);
    return row_scales != nullptr ? v * row_scales[j] * token_scale : v;
  };
  if (h >= num_heads + nkv) {  // a V head, in the usual order
    if (slot < 0) return;
    const float x0 = i < half ? round_bf16(value(i)) : 0.0f;  // (exact when src holds the values)
    const float x1 = i < half ? round_bf16(value(i + half)) : 0.0f;
    const Fp8Row dst = fp8_row(c, true, slot, h - num_heads - nkv);
    store_fp8_row(dst.codes, dst.exponent, x0, x1, i, half);
    return;
  }
  if (h >= num_heads && slot < 0) return;
  float o0 = 0.0f, o1 = 0.0f;  // the pair (i, i + half) sits at src[2i], src[2i + 1]
  if (i < half) {
    rope_rotate_pair(value(2 * i), value(2 * i + 1), positions[t], inv_freq[i], scaling, &o0, &o1);
  }
  if (h < num_heads) {
    bf16* dst = q_out + (t * num_heads + h) * hd;
    if (i < half) {
      dst[i] = __float2bfloat16(o0);
      dst[i + half] = __float2bfloat16(o1);
    }
    return;
  }
  // K: rounded to bf16 as the bf16 cache stores it, then quantized.
  const Fp8Row dst = fp8_row(c, false, slot, h - num_heads);
  store_fp8_row(dst.codes, dst.exponent, round_bf16(o0), round_bf16(o1), i, half);
}

unsigned row_threads(int head_dim) { return static_cast<unsigned>((head_dim / 2 + 31) / 32 * 32); }

void check_layer(const Fp8KvLayer& c, const char* what) {
  const bool ok = c.head_dim > 0 && c.head_dim % 2 == 0 && c.head_dim <= 64 * kMaxWarps && c.num_kv_heads > 0 &&
                  c.block_size > 0;
  if (!ok) throw_cuda_error(cudaErrorInvalidValue, what, __FILE__, __LINE__);
}

}  // namespace

void store_kv_fp8(const Fp8KvLayer& cache, const bf16* k, const bf16* v, const int32_t* slot_mapping, int num_tokens,
                  cudaStream_t stream) {
  if (num_tokens <= 0) return;
  check_layer(cache, "store_kv_fp8: bad shape");
  const dim3 grid(static_cast<unsigned>(num_tokens), static_cast<unsigned>(cache.num_kv_heads), 2);
  launch_kernel("store_kv_fp8", store_kv_fp8_kernel, grid, row_threads(cache.head_dim), 0, stream, cache, k, v,
                slot_mapping);
}

void qkv_rope_store_fp8(bf16* q_out, const bf16* qkv, const Fp8KvLayer& cache, const int32_t* positions,
                        const int32_t* slot_mapping, const float* inv_freq, float scaling, int num_tokens,
                        int num_heads, cudaStream_t stream, ProductScales scales) {
  if (num_tokens <= 0) return;
  check_layer(cache, "qkv_rope_store_fp8: bad shape");
  const dim3 grid(static_cast<unsigned>(num_tokens), static_cast<unsigned>(num_heads + 2 * cache.num_kv_heads));
  launch_kernel("qkv_rope_store_fp8", qkv_rope_store_fp8_kernel, grid, row_threads(cache.head_dim), 0, stream, q_out,
                qkv, cache, positions, slot_mapping, inv_freq, scaling, num_heads, scales);
}

}  // namespace pagoda::kernels
