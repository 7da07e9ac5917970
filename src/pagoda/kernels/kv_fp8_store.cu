// FP8 KV store kernels (contract: kv_fp8_store.h; number format: kv/kv_fp8.h). store_kv_fp8: one block per (token,
// head row), ceil(hd / 2 / 32) warps; thread i holds elements i and i + hd / 2, the block reduces the row's amax, and
// each thread writes its two codes. qkv_rope_store_fp8: a warp per head row, a lane holding every 32nd pair.
#include "pagoda/kernels/kv_fp8_store.h"

#include <cuda_fp8.h>

#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/launch.cuh"
#include "pagoda/kernels/product_scales.cuh"
#include "pagoda/kernels/rope_pair.cuh"

namespace pagoda::kernels {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kMaxWarps = 4;      // head_dim <= 256: a block of store_kv_fp8 has at most 4 warps
constexpr int kMaxLanePairs = 4;  // and a lane of qkv_rope_store_fp8 at most 4 pairs

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

// Warp-wide: quantizes the row whose pairs (i, i + half) for i = lane + 32 k lane holds in x0[k], x1[k] into
// codes[0, 2 half) and *exponent (the row's amax by shuffles, no barrier). Every lane of the warp calls it.
__device__ __forceinline__ void store_fp8_row_warp(uint8_t* codes, int8_t* exponent, const float (&x0)[kMaxLanePairs],
                                                   const float (&x1)[kMaxLanePairs], int lane, int half) {
  float amax = 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxLanePairs; ++k) amax = fmaxf(amax, fmaxf(fabsf(x0[k]), fabsf(x1[k])));  // (0 where unused)
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const int e = fp8_kv_exponent(amax);
  const float inv = __int_as_float((127 - e) << 23);  // 2^-e, a normal float for e in [-126, 63]
#pragma unroll
  for (int k = 0; k < kMaxLanePairs; ++k) {
    const int i = lane + 32 * k;
    if (i >= half) break;
    codes[i] = __nv_cvt_float_to_fp8(x0[k] * inv, __NV_SATFINITE, __NV_E4M3);
    codes[i + half] = __nv_cvt_float_to_fp8(x1[k] * inv, __NV_SATFINITE, __NV_E4M3);
  }
  if (lane == 0) *exponent = static_cast<int8_t>(e);
}

// Blocks of qkv_rope_grid (rope_pair.cuh) as qkv_rope_store_kernel's (elementwise.cu), a warp per head: the token's
// RoPE (cos, sin) once into shared memory, then warp w takes heads blockIdx.y * warps + w, stepping by gridDim.y *
// warps, lane holding pairs lane + 32 k; K and V rows into the FP8 cache. blockDim = (32, kQkvFp8Warps); shared
// memory: half float2.
constexpr int kQkvFp8Warps = 8;
__global__ void qkv_rope_store_fp8_kernel(bf16* q_out, const bf16* qkv, const Fp8KvLayer c, const int32_t* positions,
                                          const int32_t* slot_mapping, const float* inv_freq, float scaling,
                                          int num_heads, ProductScales scales) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  extern __shared__ float2 rope_cs[];  // [half]
  const int64_t t = blockIdx.x;
  const int nkv = c.num_kv_heads, hd = c.head_dim, half = hd / 2, heads = num_heads + 2 * nkv, lane = threadIdx.x;
  const int pos = positions[t];
  for (int i = threadIdx.y * 32 + lane; i < half; i += 32 * blockDim.y) rope_cs[i] = rope_cos_sin(pos, inv_freq[i], scaling);
  __syncthreads();
  const int64_t slot = slot_mapping[t];
  const float token_scale = scales.rows != nullptr ? scales.tokens[t] : 1.0f;
  for (int h = blockIdx.y * blockDim.y + threadIdx.y; h < heads; h += gridDim.y * blockDim.y) {  // warp-uniform
    if (h >= num_heads && slot < 0) continue;
    const bf16* src = qkv + (t * heads + h) * hd;
    // Element j of this head: as stored, or the FP8 GEMM's sum times its row's scale and the token's.
    const float* row_scales = scales.rows != nullptr ? scales.rows + static_cast<int64_t>(h) * hd : nullptr;
    const auto value = [&](int j) {
      const float v = __bfloat162float(src[j]);
      return row_scales != nullptr ? scaled_sum(v, row_scales[j], token_scale) : v;
    };
    float x0[kMaxLanePairs] = {}, x1[kMaxLanePairs] = {};
    if (h >= num_heads + nkv) {  // a V head, in the usual order (rounding exact when src holds the values)
#pragma unroll
      for (int k = 0; k < kMaxLanePairs; ++k) {
        const int i = lane + 32 * k;
        if (i >= half) break;
        x0[k] = round_bf16(value(i));
        x1[k] = round_bf16(value(i + half));
      }
      const Fp8Row dst = fp8_row(c, true, slot, h - num_heads - nkv);
      store_fp8_row_warp(dst.codes, dst.exponent, x0, x1, lane, half);
      continue;
    }
#pragma unroll
    for (int k = 0; k < kMaxLanePairs; ++k) {  // the pair (i, i + half) sits at src[2i], src[2i + 1]
      const int i = lane + 32 * k;
      if (i >= half) break;
      rope_apply(value(2 * i), value(2 * i + 1), rope_cs[i], &x0[k], &x1[k]);
    }
    if (h < num_heads) {
      bf16* dst = q_out + (t * num_heads + h) * hd;
#pragma unroll
      for (int k = 0; k < kMaxLanePairs; ++k) {
        const int i = lane + 32 * k;
        if (i >= half) break;
        dst[i] = __float2bfloat16(x0[k]);
        dst[i + half] = __float2bfloat16(x1[k]);
      }
      continue;
    }
    // K: rounded to bf16 as the bf16 cache stores it, then quantized.
#pragma unroll
    for (int k = 0; k < kMaxLanePairs; ++k) {
      x0[k] = round_bf16(x0[k]);
      x1[k] = round_bf16(x1[k]);
    }
    const Fp8Row dst = fp8_row(c, false, slot, h - num_heads);
    store_fp8_row_warp(dst.codes, dst.exponent, x0, x1, lane, half);
  }
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
  const dim3 grid = qkv_rope_grid(num_tokens, num_heads + 2 * cache.num_kv_heads, kQkvFp8Warps);
  const dim3 threads(32, kQkvFp8Warps);
  launch_kernel("qkv_rope_store_fp8", qkv_rope_store_fp8_kernel, grid, threads,
                static_cast<size_t>(cache.head_dim / 2) * sizeof(float2), stream, q_out, qkv, cache, positions,
                slot_mapping, inv_freq, scaling, num_heads, scales);
}

}  // namespace pagoda::kernels
