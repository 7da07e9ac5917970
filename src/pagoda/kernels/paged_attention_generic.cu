// Paged attention for every even head_dim up to 256 without a tensor-core path (the tiny models: 8, 16),
// prefill and decode: one warp per (token, head), fp32, one key at a time, bf16 or FP8 KV. Speed does not
// matter there.
#include "pagoda/kernels/paged_attention_common.cuh"

namespace pagoda::kernels::attention {
namespace {

// ---------------------------------------------------------------------------------------------------
// Any even head_dim <= 64 * P: one warp per (token, query head), lane i holds dim pairs i, i + 32, ...
// grid = (num_tokens, ceil(num_heads / 4)), 128 threads. `decode`: token t is sequence t (token_seq unused).
// Dims 2i, 2i + 1 of the row of `slot` and KV head kvh in the K (or V) cache, bf16 or FP8.
__device__ __forceinline__ float2 load_kv_pair(const PagedAttentionParams& p, bool is_v, int64_t slot, int kvh, int i) {
  const int64_t row = slot * p.num_kv_heads + kvh;
  if (p.k_fp8 == nullptr) {
    const bf16* cache = is_v ? p.v_cache : p.k_cache;
    return __bfloat1622float2(reinterpret_cast<const __nv_bfloat162*>(cache + row * p.head_dim)[i]);
  }
  const uint8_t* codes = (is_v ? p.v_fp8 : p.k_fp8) + row * p.head_dim;
  const int8_t e = (is_v ? p.v_exp : p.k_exp)[((slot / p.block_size) * p.num_kv_heads + kvh) * p.block_size +
                                              slot % p.block_size];
  const __nv_fp8x2_storage_t pair = *reinterpret_cast<const __nv_fp8x2_storage_t*>(codes + 2 * i);
  const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3)));
  const float scale = exp2_int(e);
  // Rounded to bf16 as the tensor-core kernels' tiles are (exact: e4m3 codes need 4 bits).
  return __bfloat1622float2(__floats2bfloat162_rn(f.x * scale, f.y * scale));
}

template <int P>
__global__ void __launch_bounds__(kThreads) generic_kernel(const __grid_constant__ PagedAttentionParams p, bool decode) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  const int tok = blockIdx.x;
  const int h = blockIdx.y * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (h >= p.num_heads) return;
  const int half = p.head_dim / 2;
  const int s = decode ? tok : p.token_seq[tok];
  const int q_begin = p.query_start[s];
  const int q_len = p.query_start[s + 1] - q_begin;
  const int seq_len = p.seq_lens[s];
  const int num_keys = min(seq_len, seq_len - q_len + (tok - q_begin) + 1);  // causal
  const int64_t row = (static_cast<int64_t>(tok) * p.num_heads + h) * half;  // in bf16 pairs
  __nv_bfloat162* out = reinterpret_cast<__nv_bfloat162*>(p.out) + row;
  if (num_keys <= 0) {  // padding sequence
    for (int i = lane; i < half; i += 32) out[i] = __floats2bfloat162_rn(0.0f, 0.0f);
    return;
  }
  const int kvh = h / (p.num_heads / p.num_kv_heads);
  const float scale = p.scale * kLog2e;
  const __nv_bfloat162* q = reinterpret_cast<const __nv_bfloat162*>(p.q) + row;
  float2 qv[P], acc[P];
#pragma unroll
  for (int k = 0; k < P; ++k) {
    const int i = lane + 32 * k;
    qv[k] = i < half ? __bfloat1622float2(q[i]) : make_float2(0.0f, 0.0f);
    qv[k].x *= scale;
    qv[k].y *= scale;
    acc[k] = make_float2(0.0f, 0.0f);
  }
  const int32_t* pages = p.kv_pages + p.kv_page_start[s];
  float m = -INFINITY, l = 0.0f;
  for (int key0 = 0, pg = 0; key0 < num_keys; key0 += p.block_size, ++pg) {
    const int64_t page_slot0 = static_cast<int64_t>(pages[pg]) * p.block_size;
    const int n = min(p.block_size, num_keys - key0);
    for (int off = 0; off < n; ++off) {
      const int64_t slot = page_slot0 + off;
      float dot = 0.0f;
#pragma unroll
      for (int k = 0; k < P; ++k) {
        const int i = lane + 32 * k;
        if (i < half) {
          const float2 kv = load_kv_pair(p, false, slot, kvh, i);
          dot += qv[k].x * kv.x + qv[k].y * kv.y;
        }
      }
#pragma unroll
      for (int mask = 16; mask > 0; mask >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, mask);
      const float m_new = fmaxf(m, dot);
      const float alpha = exp2f(m - m_new);  // 0 on the first key
      const float w = exp2f(dot - m_new);
      l = l * alpha + w;
#pragma unroll
      for (int k = 0; k < P; ++k) {
        const int i = lane + 32 * k;
        const float2 vv = i < half ? load_kv_pair(p, true, slot, kvh, i) : make_float2(0.0f, 0.0f);
        acc[k].x = acc[k].x * alpha + w * vv.x;
        acc[k].y = acc[k].y * alpha + w * vv.y;
      }
      m = m_new;
    }
  }
  const float inv = 1.0f / l;
#pragma unroll
  for (int k = 0; k < P; ++k) {
    const int i = lane + 32 * k;
    if (i < half) out[i] = __floats2bfloat162_rn(acc[k].x * inv, acc[k].y * inv);
  }
}


}  // namespace

void launch_generic(const PagedAttentionParams& p, bool decode, cudaStream_t stream) {
  const dim3 grid(p.num_tokens, (p.num_heads + kWarps - 1) / kWarps);
  const char* name = "paged_attention (generic head_dim)";
  if (p.head_dim <= 64) {
    launch_kernel(name, generic_kernel<1>, grid, kThreads, 0, stream, p, decode);
  } else if (p.head_dim <= 128) {
    launch_kernel(name, generic_kernel<2>, grid, kThreads, 0, stream, p, decode);
  } else {
    launch_kernel(name, generic_kernel<4>, grid, kThreads, 0, stream, p, decode);
  }
}

}  // namespace pagoda::kernels::attention
