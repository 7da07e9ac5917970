// Elementwise and row-wise kernels of the Llama forward pass (elementwise.h): embedding and row gathers,
// RMSNorm (plain and fused with the residual add), RoPE (in place, and fused with the KV-cache store),
// SiLU-gated products, dtype conversions and seeded random fills.
//
// Conventions: bf16 in and out, fp32 arithmetic. Every kernel has a 16-byte path (8 bf16 per access)
// taken when the sizes and the pointers allow it, and a scalar path otherwise; the choice is made once per
// launch on the host. Row kernels run one block per row; flat kernels are grid-stride loops.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "pagoda/kernels/activation.cuh"
#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/elementwise.h"
#include "pagoda/kernels/fp8_activation.cuh"
#include "pagoda/kernels/launch.cuh"
#include "pagoda/kernels/product_scales.cuh"
#include "pagoda/kernels/rope_pair.cuh"

namespace pagoda::kernels {
namespace {

constexpr int kFlatThreads = 256;         // block size of the grid-stride kernels
constexpr int64_t kMaxFlatBlocks = 8192;  // grid-stride kernels loop beyond this
constexpr int kVec = 8;                   // elements per 16-byte access of bf16/f16

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Blocks for a grid-stride loop over `work` items.
unsigned flat_blocks(int64_t work) {
  int64_t blocks = (work + kFlatThreads - 1) / kFlatThreads;
  if (blocks < 1) blocks = 1;
  if (blocks > kMaxFlatBlocks) blocks = kMaxFlatBlocks;
  return static_cast<unsigned>(blocks);
}

// Threads for a one-block-per-row kernel with `units` items per row: a multiple of 32, at most `cap`.
unsigned row_threads(int64_t units, int cap) {
  int64_t t = (units + 31) / 32 * 32;
  if (t < 32) t = 32;
  if (t > cap) t = cap;
  return static_cast<unsigned>(t);
}

// ---- 8-wide loads and stores, widened to fp32 ----

struct F8 {
  float v[kVec];
};

union Pack16 {  // one 16-byte access seen as its lanes
  uint4 u;
  __nv_bfloat162 b2[4];
  __half2 h2[4];
};

__device__ __forceinline__ F8 load8(const bf16* p) {  // p: 16-byte aligned
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
  F8 f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {  // a bf16 is the top half of an fp32: widening is exact
    f.v[2 * j] = __uint_as_float(w[j] << 16);
    f.v[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
  }
  return f;
}

__device__ __forceinline__ F8 load8(const __half* p) {
  Pack16 pk;
  pk.u = *reinterpret_cast<const uint4*>(p);
  F8 f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 t = __half22float2(pk.h2[j]);
    f.v[2 * j] = t.x;
    f.v[2 * j + 1] = t.y;
  }
  return f;
}

__device__ __forceinline__ F8 load8(const float* p) {
  const float4 a = reinterpret_cast<const float4*>(p)[0];
  const float4 b = reinterpret_cast<const float4*>(p)[1];
  return F8{{a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w}};
}

__device__ __forceinline__ void store8(bf16* p, const F8& f) {  // rounds to nearest even
  Pack16 pk;
#pragma unroll
  for (int j = 0; j < 4; ++j) pk.b2[j] = __floats2bfloat162_rn(f.v[2 * j], f.v[2 * j + 1]);
  *reinterpret_cast<uint4*>(p) = pk.u;
}

__device__ __forceinline__ void store8(float* p, const F8& f) {
  reinterpret_cast<float4*>(p)[0] = make_float4(f.v[0], f.v[1], f.v[2], f.v[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(f.v[4], f.v[5], f.v[6], f.v[7]);
}

__device__ __forceinline__ float load1(const bf16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ float load1(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load1(const float* p) { return *p; }
__device__ __forceinline__ void store1(bf16* p, float v) { *p = __float2bfloat16(v); }
__device__ __forceinline__ void store1(float* p, float v) { *p = v; }

__device__ __forceinline__ float round_bf16(float v) { return __bfloat162float(__float2bfloat16(v)); }

// Copies n bf16 with the block's threads (16-byte accesses when `vec`: n % 8 == 0, both ends aligned).
__device__ __forceinline__ void copy_row(bf16* dst, const bf16* src, int n, bool vec) {
  if (vec) {
    uint4* d = reinterpret_cast<uint4*>(dst);
    const uint4* s = reinterpret_cast<const uint4*>(src);
    for (int i = threadIdx.x; i < n / kVec; i += blockDim.x) d[i] = s[i];
  } else {
    for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
  }
}

// `op` (a sum, a maximum) over the block; every thread gets the result. Each instantiation has its own scratch,
// used once per kernel (it is not reused).
template <class Op>
__device__ __forceinline__ float block_reduce(float v, Op op) {
  __shared__ float per_warp[32];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) per_warp[warp] = v;
  __syncthreads();
  const int num_warps = (blockDim.x + 31) / 32;
  v = lane < num_warps ? per_warp[lane] : 0.0f;  // 0 is the identity of both (the maximum is of |values|)
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
__device__ __forceinline__ float block_sum(float v) { return block_reduce(v, Add{}); }
__device__ __forceinline__ float block_max(float v) { return block_reduce(v, Max{}); }

// ---- row copies: embedding, gather_rows ----

// out [R, C] = src[rows[r], :]; one block per output row.
__global__ void gather_rows_kernel(bf16* out, const bf16* src, const int32_t* rows, int row_elems, bool vec) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  const int64_t r = blockIdx.x;
  copy_row(out + r * row_elems, src + static_cast<int64_t>(rows[r]) * row_elems, row_elems, vec);
}

void launch_gather(bf16* out, const bf16* src, const int32_t* rows, int num_rows, int row_elems,
                   cudaStream_t stream, const char* name) {
  if (num_rows <= 0 || row_elems <= 0) return;
  const bool vec = row_elems % kVec == 0 && aligned16(out) && aligned16(src);
  const unsigned threads = row_threads(vec ? row_elems / kVec : row_elems, 256);
  launch_kernel(name, gather_rows_kernel, num_rows, threads, 0, stream, out, src, rows, row_elems, vec);
}

// 8 bf16 of `row` at the indices lo, hi into dst (16-byte aligned) as one 16-byte store.
__device__ __forceinline__ void store_gathered8(bf16* dst, const bf16* row, const int4& lo, const int4& hi) {
  __align__(16) bf16 v[kVec] = {row[lo.x], row[lo.y], row[lo.z], row[lo.w], row[hi.x], row[hi.y], row[hi.z], row[hi.w]};
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(v);
}

// out[r, j] = src[r, columns[j]]: a thread 8 columns, of rows blockIdx.y, + gridDim.y, ... The columns are a
// weight's input order (never written: launch.cuh), so each thread loads its 8 indices before the PDL wait, and
// after it only the rows' values (one round trip). Nsight Compute timed the form before at 6.6 us a launch (the mean
// of a W4 run's prefill and decode launches, H100, 2026-12-07): 4 blocks for 4,096 columns, each thread's 4 columns
// a dependent pair of loads after another. The linear after it (an act-order one) reads only weights before its
// wait: with `early`, it is scheduled before this kernel waits, so that its weight loads overlap the kernel before
// (launch.cuh). `vec`: cols % 8 == 0, out and columns 16-byte aligned.
__global__ void gather_columns_kernel(bf16* __restrict__ out, const bf16* __restrict__ src,
                                      const int32_t* __restrict__ columns, int rows, int cols, bool early, bool vec) {
  const int j0 = (static_cast<int>(blockIdx.x) * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)) * kVec;
  const bool active = j0 < cols;
  int4 lo = make_int4(0, 0, 0, 0), hi = lo;
  if (active && vec) {
    lo = __ldg(reinterpret_cast<const int4*>(columns + j0));
    hi = __ldg(reinterpret_cast<const int4*>(columns + j0 + 4));
  } else if (active) {
    int idx[kVec];
#pragma unroll
    for (int e = 0; e < kVec; ++e) idx[e] = j0 + e < cols ? __ldg(columns + j0 + e) : 0;
    lo = make_int4(idx[0], idx[1], idx[2], idx[3]);
    hi = make_int4(idx[4], idx[5], idx[6], idx[7]);
  }
  if (early) {
    pdl_launch_dependents_then_wait();
  } else {
    pdl_grid_sync();  // before any access to what a kernel writes (launch.cuh)
  }
  if (!active) return;
  const int idx[kVec] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int64_t base = r * cols;
    if (vec) {
      store_gathered8(out + base + j0, src + base, lo, hi);
      continue;
    }
#pragma unroll
    for (int e = 0; e < kVec; ++e)
      if (j0 + e < cols) out[base + j0 + e] = src[base + idx[e]];
  }
}

// ---- RMSNorm ----

// The 8-vector u of a row: x (kAdd: bf16(residual + x), stored back into the residual). With product scales
// (`sw`: the row's scales, `sx` the token's), x first becomes bf16(scaled_sum(x, sw, sx)).
template <bool kAdd>
__device__ __forceinline__ F8 add_residual8(const bf16* xr, bf16* rr, int u, const float* sw, float sx) {
  F8 v = load8(xr + u * kVec);
  if (kAdd && sw != nullptr) {
    const float4 a = *reinterpret_cast<const float4*>(sw + u * kVec);
    const float4 b = *reinterpret_cast<const float4*>(sw + u * kVec + 4);
    const float s[kVec] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int j = 0; j < kVec; ++j) v.v[j] = round_bf16(scaled_sum(v.v[j], s[j], sx));
  }
  if (kAdd) {
    const F8 r = load8(rr + u * kVec);
#pragma unroll
    for (int j = 0; j < kVec; ++j) v.v[j] = round_bf16(r.v[j] + v.v[j]);
    store8(rr + u * kVec, v);
  }
  return v;
}

// ss += the squares of one 8-vector, in order.
__device__ __forceinline__ void add_squares8(const F8& v, float& ss) {
#pragma unroll
  for (int j = 0; j < kVec; ++j) ss += v.v[j] * v.v[j];
}

// bf16(bf16(v * inv) * g) for one 8-vector, as the output row holds it.
__device__ __forceinline__ F8 normalised8(F8 v, const F8& g, float inv) {
#pragma unroll
  for (int j = 0; j < kVec; ++j) v.v[j] = round_bf16(round_bf16(v.v[j] * inv) * g.v[j]);
  return v;
}

__device__ __forceinline__ float amax8(const F8& v) {
  float m = 0.0f;
#pragma unroll
  for (int j = 0; j < kVec; ++j) m = fmaxf(m, fabsf(v.v[j]));
  return m;
}

// The e4m3 codes of one 8-vector (fp8_activation.cuh), 8 bytes.
__device__ __forceinline__ void store_codes8(uint8_t* dst, const F8& v, float inv) {
  uint32_t packed[2] = {0, 0};
#pragma unroll
  for (int j = 0; j < kVec; ++j) packed[j / 4] |= fp8_activation_code(v.v[j], inv) << (8 * (j % 4));
  *reinterpret_cast<uint2*>(dst) = make_uint2(packed[0], packed[1]);
}

// With `order` (a norm whose output feeds an act-order linear: Weight::output_order), out's column j is the normed
// row's column order[j]. The row is normalised into shared memory [hidden] first, then written in that order, 8
// columns a thread where the row is vectorised (order 16-byte aligned; the one-vector-a-thread path has loaded its
// 8 indices before the PDL wait: the order is a weight, launch.cuh). Nsight Compute timed the first form, a column
// a thread with its index loaded after the wait, at 10.3 us a launch against 6.8 unordered (means of a W4 run's
// prefill and decode launches, H100, 2026-12-07).
__device__ __forceinline__ void store_row_in_order(bf16* __restrict__ orow, const bf16* row,
                                                   const int32_t* __restrict__ order, int hidden, bool vec) {
  __syncthreads();
  if (vec) {
    const int4* order4 = reinterpret_cast<const int4*>(order);
    for (int u = threadIdx.x; u < hidden / kVec; u += blockDim.x)
      store_gathered8(orow + u * kVec, row, __ldg(order4 + 2 * u), __ldg(order4 + 2 * u + 1));
    return;
  }
  for (int j = threadIdx.x; j < hidden; j += blockDim.x) orow[j] = row[__ldg(order + j)];
}

// One block per row of x [R, H]. Pass 1: (kAdd: residual += x, rounded and stored) sum of squares.
// Pass 2: out = bf16(bf16(v * inv) * w). Each thread touches the same elements in both passes, so pass 2
// reads back its own residual stores. With one 16-byte vector a thread (hidden <= 4096 at 512 threads),
// the vector stays in registers and w is loaded before the reduction: one round trip to memory, not two.
// With `quantized` (codes not null): also out's row as an FP8 linear's input, e4m3 codes and the row's scale
// from its amax (fp8_activation.cuh), the bits quantize_fp8_rows(out) would give, without its launch and
// its read of the row. `order` (dynamic shared memory: hidden bf16) and `quantized` are never both set.
template <bool kAdd>
__global__ void rms_norm_kernel(bf16* out, bf16* residual, const bf16* x, const bf16* w, int hidden, float eps,
                                bool vec, ProductScales scales, Fp8Activations quantized,
                                const int32_t* __restrict__ order) {
  extern __shared__ __align__(16) bf16 ordered_row[];  // [hidden] with `order`
  // One vector a thread and an order: the thread's 8 output indices, before the wait (a weight: launch.cuh).
  const bool one_vector = vec && hidden / kVec <= static_cast<int>(blockDim.x);
  int4 order_lo = make_int4(0, 0, 0, 0), order_hi = order_lo;
  if (order != nullptr && one_vector && static_cast<int>(threadIdx.x) < hidden / kVec) {
    order_lo = __ldg(reinterpret_cast<const int4*>(order) + 2 * threadIdx.x);
    order_hi = __ldg(reinterpret_cast<const int4*>(order) + 2 * threadIdx.x + 1);
  }
  pdl_grid_sync();  // before any access to what a kernel writes (launch.cuh)
  const int64_t base = static_cast<int64_t>(blockIdx.x) * hidden;
  const float* sw = scales.rows;  // (kAdd only)
  const float sx = sw != nullptr ? scales.tokens[blockIdx.x] : 1.0f;
  const bf16* xr = x + base;
  bf16* rr = kAdd ? residual + base : nullptr;
  bf16* const orow_out = out + base;
  bf16* orow = order != nullptr ? ordered_row : orow_out;  // where the normalised row is stored in its own order
  const int nv = vec ? hidden / kVec : 0;
  if (one_vector) {
    const int u = threadIdx.x;
    const bool active = u < nv;
    const F8 v = active ? add_residual8<kAdd>(xr, rr, u, sw, sx) : F8{};
    const F8 g = active ? load8(w + u * kVec) : F8{};
    float ss = 0.0f;
    add_squares8(v, ss);
    const float inv = rsqrtf(block_sum(ss) / static_cast<float>(hidden) + eps);
    const F8 n = active ? normalised8(v, g, inv) : F8{};
    if (active) store8(orow + u * kVec, n);
    if (order != nullptr) {
      __syncthreads();
      if (active) store_gathered8(orow_out + u * kVec, orow, order_lo, order_hi);
    }
    if (quantized.codes != nullptr) {
      const float scale = fp8_activation_scale(block_max(amax8(n)));
      if (threadIdx.x == 0) quantized.scales[blockIdx.x] = scale;
      if (active) store_codes8(quantized.codes + base + u * kVec, n, __frcp_rn(scale));
    }
    return;
  }
  float ss = 0.0f;
  if (vec) {
    for (int u = threadIdx.x; u < nv; u += blockDim.x) add_squares8(add_residual8<kAdd>(xr, rr, u, sw, sx), ss);
  } else {
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
      float v = load1(xr + i);
      if (kAdd) {
        if (sw != nullptr) v = round_bf16(scaled_sum(v, sw[i], sx));
        v = round_bf16(load1(rr + i) + v);
        store1(rr + i, v);
      }
      ss += v * v;
    }
  }
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(hidden) + eps);
  const bf16* src = kAdd ? rr : xr;
  float amax = 0.0f;  // of the row as stored (quantized only)
  if (vec) {
    for (int u = threadIdx.x; u < nv; u += blockDim.x) {
      const F8 n = normalised8(load8(src + u * kVec), load8(w + u * kVec), inv);
      store8(orow + u * kVec, n);
      amax = fmaxf(amax, amax8(n));
    }
  } else {
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
      const float n = round_bf16(round_bf16(load1(src + i) * inv) * load1(w + i));
      store1(orow + i, n);
      amax = fmaxf(amax, fabsf(n));
    }
  }
  if (order != nullptr) store_row_in_order(orow_out, orow, order, hidden, vec);
  if (quantized.codes == nullptr) return;
  const float scale = fp8_activation_scale(block_max(amax));
  if (threadIdx.x == 0) quantized.scales[blockIdx.x] = scale;
  const float rcp = __frcp_rn(scale);
  uint8_t* codes = quantized.codes + base;
  if (vec) {  // each thread reads back its own stores
    for (int u = threadIdx.x; u < nv; u += blockDim.x) store_codes8(codes + u * kVec, load8(orow + u * kVec), rcp);
  } else {
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) codes[i] = static_cast<uint8_t>(fp8_activation_code(load1(orow + i), rcp));
  }
}

template <bool kAdd>
void launch_rms_norm(bf16* out, bf16* residual, const bf16* x, const bf16* w, int rows, int hidden, float eps,
                     cudaStream_t stream, const char* name, ProductScales scales, Fp8Activations quantized,
                     const int32_t* order) {
  if (rows <= 0 || hidden <= 0) return;
  const size_t ordered_bytes = order != nullptr ? static_cast<size_t>(hidden) * sizeof(bf16) : 0;
  if (order != nullptr && (quantized.codes != nullptr || ordered_bytes > 48 * 1024))
    throw_cuda_error(cudaErrorInvalidValue, "rms_norm: an output order with FP8 codes, or a row over 48 KiB",
                     __FILE__, __LINE__);
  const bool vec = hidden % kVec == 0 && aligned16(out) && aligned16(x) && aligned16(w) &&
                   (!kAdd || aligned16(residual)) && (scales.rows == nullptr || aligned16(scales.rows)) &&
                   (order == nullptr || aligned16(order)) &&
                   (quantized.codes == nullptr || reinterpret_cast<uintptr_t>(quantized.codes) % 8 == 0);
  const unsigned threads = row_threads(vec ? hidden / kVec : hidden, 512);
  launch_kernel(name, rms_norm_kernel<kAdd>, rows, threads, ordered_bytes, stream, out, residual, x, w, hidden, eps,
                vec, scales, quantized, order);
}

// ---- RoPE ----

// cs [2 * half]: cos * scaling, then sin * scaling, for token position `pos`. The fp32 angle is reduced
// in double, so positions of 100k+ keep full accuracy whatever the math flags.
__device__ __forceinline__ void rope_table(float* cs, int32_t pos, const float* inv_freq, int half, float scaling) {
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float angle = __fmul_rn(static_cast<float>(pos), inv_freq[i]);
    double s, c;
    sincos(static_cast<double>(angle), &s, &c);
    cs[i] = static_cast<float>(c) * scaling;
    cs[half + i] = static_cast<float>(s) * scaling;
  }
  __syncthreads();
}

// Rotates the pair (i, i + half) of one head: src may equal dst (in place).
__device__ __forceinline__ void rotate_pair(bf16* dst, const bf16* src, int i, int half, float c, float s) {
  const float x0 = load1(src + i);
  const float x1 = load1(src + i + half);
  store1(dst + i, x0 * c - x1 * s);
  store1(dst + i + half, x1 * c + x0 * s);
}

// One block per token: q [T, nh, hd] and k [T, nkv, hd] in place.
__global__ void rope_kernel(bf16* q, bf16* k, const int32_t* positions, const float* inv_freq, float scaling,
                            int num_heads, int num_kv_heads, int head_dim) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  extern __shared__ float cs[];  // [2 * half]
  const int64_t t = blockIdx.x;
  const int half = head_dim / 2;
  rope_table(cs, positions[t], inv_freq, half, scaling);
  const int pairs = (num_heads + num_kv_heads) * half;
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int h = p / half;
    const int i = p - h * half;
    bf16* v = h < num_heads ? q + (t * num_heads + h) * head_dim
                            : k + (t * num_kv_heads + (h - num_heads)) * head_dim;
    rotate_pair(v, v, i, half, cs[i], cs[half + i]);
  }
}

// Blocks of qkv_rope_grid over qkv [T, nh + 2 nkv, hd]: a block takes one token's heads blockIdx.y * rows + row,
// stepping by gridDim.y * rows, with the token's RoPE (cos, sin) computed once into shared memory; a thread per pair:
// q heads -> q_out [T, nh, hd] = rope(q); unless slot < 0, k heads -> rope(k) and v heads -> v into the cache rows
// [slot] of k_cache, v_cache [slots, nkv, hd]. cos/sin in fp32 (sincosf, accurate for any argument) of the fp32 angle
// positions[t] * inv_freq[i]. blockDim = (half rounded up to 32, kQkvHeadRows); shared memory: half float2.
constexpr int kQkvHeadRows = 4;
__global__ void qkv_rope_store_kernel(bf16* q_out, const bf16* qkv, bf16* k_cache, bf16* v_cache,
                                      const int32_t* positions, const int32_t* slot_mapping, const float* inv_freq,
                                      float scaling, int num_heads, int num_kv_heads, int head_dim,
                                      ProductScales scales) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  extern __shared__ float2 rope_cs[];  // [half]
  const int64_t t = blockIdx.x;
  const int half = head_dim / 2, heads = num_heads + 2 * num_kv_heads;
  const int thread = threadIdx.y * blockDim.x + threadIdx.x;
  const int pos = positions[t];
  for (int i = thread; i < half; i += blockDim.x * blockDim.y) rope_cs[i] = rope_cos_sin(pos, inv_freq[i], scaling);
  __syncthreads();
  const int64_t slot = slot_mapping[t];
  const float token_scale = scales.rows != nullptr ? scales.tokens[t] : 1.0f;
  const int i = threadIdx.x;  // the pair (i, i + half) of a Q or K head sits at src[2i], src[2i + 1]
  if (i >= half) return;      // (no barrier below)
  for (int h = blockIdx.y * blockDim.y + threadIdx.y; h < heads; h += gridDim.y * blockDim.y) {
    const bf16* src = qkv + (t * heads + h) * head_dim;
    // The FP8 GEMM's sums: element j of this head times its row's scale and the token's, in that order.
    const float* row_scales = scales.rows != nullptr ? scales.rows + static_cast<int64_t>(h) * head_dim : nullptr;
    const auto value = [&](int j) { return row_scales != nullptr ? scaled_sum(load1(src + j), row_scales[j], token_scale) : load1(src + j); };
    if (h >= num_heads + num_kv_heads) {  // a V head: elements 2i, 2i + 1 copied as they are
      if (slot < 0) continue;
      bf16* dst = v_cache + (slot * num_kv_heads + (h - num_heads - num_kv_heads)) * head_dim;
      if (row_scales != nullptr) {
        store1(dst + 2 * i, value(2 * i));
        store1(dst + 2 * i + 1, value(2 * i + 1));
      } else {
        dst[2 * i] = src[2 * i];
        dst[2 * i + 1] = src[2 * i + 1];
      }
      continue;
    }
    bf16* dst;
    if (h < num_heads) {
      dst = q_out + (t * num_heads + h) * head_dim;
    } else {
      if (slot < 0) continue;
      dst = k_cache + (slot * num_kv_heads + (h - num_heads)) * head_dim;
    }
    float o0, o1;
    rope_apply(value(2 * i), value(2 * i + 1), rope_cs[i], &o0, &o1);
    store1(dst + i, o0);
    store1(dst + i + half, o1);
  }
}

// ---- KV store ----

// One block per token: k, v [T, nkv * hd] to the cache rows slot_mapping[t].
__global__ void store_kv_kernel(bf16* k_cache, bf16* v_cache, const bf16* k, const bf16* v,
                                const int32_t* slot_mapping, int row_elems, bool vec) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  const int64_t t = blockIdx.x;
  const int64_t slot = slot_mapping[t];
  if (slot < 0) return;  // padding token
  copy_row(k_cache + slot * row_elems, k + t * row_elems, row_elems, vec);
  copy_row(v_cache + slot * row_elems, v + t * row_elems, row_elems, vec);
}

// ---- SiLU-gated products ----


// out [n] = silu(gate) * up.
__global__ void silu_mul_kernel(bf16* out, const bf16* gate, const bf16* up, int64_t n, bool vec) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nv = vec ? n / kVec : 0;
  for (int64_t i = tid; i < nv; i += stride) {
    F8 g = load8(gate + i * kVec);
    const F8 u = load8(up + i * kVec);
#pragma unroll
    for (int j = 0; j < kVec; ++j) g.v[j] = swiglu(g.v[j], u.v[j]);
    store8(out + i * kVec, g);
  }
  for (int64_t i = nv * kVec + tid; i < n; i += stride) store1(out + i, swiglu(load1(gate + i), load1(up + i)));
}

// out [R, I] = silu(gate_up[:, 2j]) * gate_up[:, 2j + 1] (rows of the gate-up weight interleaved). `vec`:
// 4 outputs per item from one 16-byte load (I % 4 == 0, gate_up 16-byte and out 8-byte aligned).
__global__ void silu_mul_interleaved_kernel(bf16* out, const bf16* gate_up, int64_t rows, int inter, bool vec,
                                            ProductScales scales) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  const int64_t units = vec ? inter / 4 : inter;
  const int64_t total = rows * units;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    const int64_t r = idx / units;
    const int64_t c = idx - r * units;
    const bf16* gu = gate_up + r * 2 * inter;
    bf16* o = out + r * inter;
    if (vec) {
      F8 v = load8(gu + c * 8);
      if (scales.rows != nullptr) {  // the FP8 GEMM's sums: times the row's and the token's scales, in that order
        const float sx = scales.tokens[r];
        const float4 a = *reinterpret_cast<const float4*>(scales.rows + c * 8);
        const float4 b = *reinterpret_cast<const float4*>(scales.rows + c * 8 + 4);
        const float sw[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int j = 0; j < 8; ++j) v.v[j] = scaled_sum(v.v[j], sw[j], sx);
      }
      __nv_bfloat162 pair[2];
      pair[0] = __floats2bfloat162_rn(swiglu(v.v[0], v.v[1]), swiglu(v.v[2], v.v[3]));
      pair[1] = __floats2bfloat162_rn(swiglu(v.v[4], v.v[5]), swiglu(v.v[6], v.v[7]));
      *reinterpret_cast<uint2*>(o + c * 4) = *reinterpret_cast<const uint2*>(pair);
    } else {
      float g = load1(gu + 2 * c), u = load1(gu + 2 * c + 1);
      if (scales.rows != nullptr) {
        g = g * scales.rows[2 * c] * scales.tokens[r];
        u = u * scales.rows[2 * c + 1] * scales.tokens[r];
      }
      store1(o + c, swiglu(g, u));
    }
  }
}

// ---- conversions ----

// out [n] = in [n] through fp32 (exact widening, one rounding to nearest even when narrowing).
template <class Out, class In>
__global__ void convert_kernel(Out* out, const In* in, int64_t n, bool vec) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nv = vec ? n / kVec : 0;
  for (int64_t i = tid; i < nv; i += stride) store8(out + i * kVec, load8(in + i * kVec));
  for (int64_t i = nv * kVec + tid; i < n; i += stride) store1(out + i, load1(in + i));
}

template <class Out, class In>
void launch_convert(Out* out, const In* in, int64_t n, cudaStream_t stream, const char* name) {
  if (n <= 0) return;
  const bool vec = aligned16(out) && aligned16(in);
  launch_kernel(name, convert_kernel<Out, In>, flat_blocks(vec ? n / kVec : n), kFlatThreads, 0, stream, out, in, n,
                vec);
}

// ---- seeded random fill ----

__device__ __forceinline__ uint64_t mix64(uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Elements 2p and 2p + 1 of the stream `key`: Box-Muller on two 24-bit uniforms from one hash, so every
// value depends only on (seed, index), never on the launch configuration.
__device__ __forceinline__ float2 normal_pair(uint64_t key, uint64_t p) {
  const uint64_t h = mix64(key + p * 0x9e3779b97f4a7c15ull);
  const float u1 = static_cast<float>((h >> 40) + 1) * 0x1p-24f;  // (0, 1]
  const float u2 = static_cast<float>(h & 0xffffffu) * 0x1p-24f;  // [0, 1)
  const float r = sqrtf(-2.0f * __logf(u1));
  float s, c;
  __sincosf(6.283185307f * u2, &s, &c);  // argument in [0, 2 pi): the fast form is accurate here
  return make_float2(r * c, r * s);
}

__global__ void fill_random_kernel(bf16* out, int64_t n, uint64_t key, float stddev, float value, bool vec) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nv = vec ? n / kVec : 0;
  for (int64_t i = tid; i < nv; i += stride) {
    F8 f;
#pragma unroll
    for (int j = 0; j < kVec / 2; ++j) {
      const float2 z = stddev != 0.0f ? normal_pair(key, static_cast<uint64_t>(i) * 4 + j) : make_float2(0.f, 0.f);
      f.v[2 * j] = stddev != 0.0f ? z.x * stddev : value;
      f.v[2 * j + 1] = stddev != 0.0f ? z.y * stddev : value;
    }
    store8(out + i * kVec, f);
  }
  for (int64_t i = nv * kVec + tid; i < n; i += stride) {
    float v = value;
    if (stddev != 0.0f) {
      const float2 z = normal_pair(key, static_cast<uint64_t>(i) / 2);
      v = (i % 2 ? z.y : z.x) * stddev;
    }
    store1(out + i, v);
  }
}

uint64_t mix64_host(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

void embedding(bf16* out, const int32_t* ids, const bf16* table, int num_tokens, int hidden, cudaStream_t stream) {
  launch_gather(out, table, ids, num_tokens, hidden, stream, "embedding");
}

void gather_rows(bf16* out, const bf16* x, const int32_t* rows, int num_rows, int row_elems, cudaStream_t stream) {
  launch_gather(out, x, rows, num_rows, row_elems, stream, "gather_rows");
}

void gather_columns(bf16* out, const bf16* x, const int32_t* columns, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  // PAGODA_GATHER_EARLY_LAUNCH=0: the next kernel is scheduled after this one's wait (A/B runs).
  static const bool early = env_flag("PAGODA_GATHER_EARLY_LAUNCH", true);
  const bool vec = cols % kVec == 0 && aligned16(out) && aligned16(columns);
  const int threads_needed = (cols + kVec - 1) / kVec;
  const unsigned threads = static_cast<unsigned>(std::min(256, (threads_needed + 31) / 32 * 32));
  const dim3 grid((threads_needed + threads - 1) / threads, std::min(rows, 65535));  // (grid.y's limit)
  launch_kernel("gather_columns", gather_columns_kernel, grid, threads, 0, stream, out, x, columns, rows, cols, early,
                vec);
}

void rms_norm(bf16* out, const bf16* x, const bf16* w, int rows, int hidden, float eps, cudaStream_t stream,
              Fp8Activations quantized, const int32_t* order) {
  launch_rms_norm<false>(out, nullptr, x, w, rows, hidden, eps, stream, "rms_norm", {}, quantized, order);
}

void add_rms_norm(bf16* residual, const bf16* x, bf16* out, const bf16* w, int rows, int hidden, float eps,
                  cudaStream_t stream, ProductScales scales, Fp8Activations quantized, const int32_t* order) {
  launch_rms_norm<true>(out, residual, x, w, rows, hidden, eps, stream, "add_rms_norm", scales, quantized, order);
}

void rope(bf16* q, bf16* k, const int32_t* positions, const float* inv_freq, float scaling, int num_tokens,
          int num_heads, int num_kv_heads, int head_dim, cudaStream_t stream) {
  if (k == nullptr) num_kv_heads = 0;
  const int half = head_dim / 2;
  if (num_tokens <= 0 || half <= 0 || num_heads + num_kv_heads <= 0) return;
  const unsigned threads = row_threads(static_cast<int64_t>(num_heads + num_kv_heads) * half, 256);
  launch_kernel("rope", rope_kernel, num_tokens, threads, 2 * half * sizeof(float), stream, q, k, positions, inv_freq,
                scaling, num_heads, num_kv_heads, head_dim);
}

void store_kv(bf16* k_cache, bf16* v_cache, const bf16* k, const bf16* v, const int32_t* slot_mapping,
              int num_tokens, int num_kv_heads, int head_dim, cudaStream_t stream) {
  const int row = num_kv_heads * head_dim;
  if (num_tokens <= 0 || row <= 0) return;
  const bool vec = row % kVec == 0 && aligned16(k_cache) && aligned16(v_cache) && aligned16(k) && aligned16(v);
  launch_kernel("store_kv", store_kv_kernel, num_tokens, row_threads(vec ? row / kVec : row, 256), 0, stream, k_cache,
                v_cache, k, v, slot_mapping, row, vec);
}

void qkv_rope_store(bf16* q_out, const bf16* qkv, bf16* k_cache, bf16* v_cache, const int32_t* positions,
                    const int32_t* slot_mapping, const float* inv_freq, float scaling, int num_tokens, int num_heads,
                    int num_kv_heads, int head_dim, cudaStream_t stream, ProductScales scales) {
  const int half = head_dim / 2;
  if (num_tokens <= 0 || half <= 0 || num_heads + num_kv_heads <= 0) return;
  const dim3 threads(static_cast<unsigned>((half + 31) / 32 * 32), kQkvHeadRows);
  const dim3 grid = qkv_rope_grid(num_tokens, num_heads + 2 * num_kv_heads, kQkvHeadRows);
  launch_kernel("qkv_rope_store", qkv_rope_store_kernel, grid, threads,
                static_cast<size_t>(half) * sizeof(float2), stream, q_out, qkv, k_cache, v_cache, positions, slot_mapping,
                inv_freq, scaling, num_heads, num_kv_heads, head_dim, scales);
}

void silu_mul(bf16* out, const bf16* gate, const bf16* up, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const bool vec = aligned16(out) && aligned16(gate) && aligned16(up);
  launch_kernel("silu_mul", silu_mul_kernel, flat_blocks(vec ? n / kVec : n), kFlatThreads, 0, stream, out, gate, up, n, vec);
}

void silu_mul_interleaved(bf16* out, const bf16* gate_up, int rows, int intermediate, cudaStream_t stream,
                          ProductScales scales) {
  if (rows <= 0 || intermediate <= 0) return;
  const bool vec = intermediate % 4 == 0 && aligned16(gate_up) && reinterpret_cast<uintptr_t>(out) % 8 == 0 &&
                   reinterpret_cast<uintptr_t>(scales.rows) % 16 == 0;
  const int64_t work = static_cast<int64_t>(rows) * (vec ? intermediate / 4 : intermediate);
  launch_kernel("silu_mul_interleaved", silu_mul_interleaved_kernel, flat_blocks(work), kFlatThreads, 0, stream, out,
                gate_up, static_cast<int64_t>(rows), intermediate, vec, scales);
}

void bf16_to_f32(float* out, const bf16* x, int64_t n, cudaStream_t stream) {
  launch_convert(out, x, n, stream, "bf16_to_f32");
}

void f32_to_bf16(bf16* out, const float* x, int64_t n, cudaStream_t stream) {
  launch_convert(out, x, n, stream, "f32_to_bf16");
}

void f16_to_bf16(bf16* out, const __half* x, int64_t n, cudaStream_t stream) {
  launch_convert(out, x, n, stream, "f16_to_bf16");
}

void fill_random(bf16* out, int64_t n, uint64_t seed, float stddev, float value, cudaStream_t stream) {
  if (n <= 0) return;
  const bool vec = aligned16(out);
  const uint64_t key = mix64_host(seed ^ 0x632be59bd9b4e019ull);
  launch_kernel("fill_random", fill_random_kernel, flat_blocks(vec ? n / kVec : n), kFlatThreads, 0, stream, out, n, key,
                stddev, value, vec);
}

}  // namespace pagoda::kernels
