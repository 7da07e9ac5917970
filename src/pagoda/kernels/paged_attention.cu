// Paged attention on the GPU (contract: paged_attention.h): bf16 q/K/V, fp32 softmax and accumulation,
// bf16 output. Keys and values are gathered from the block KV cache [num_blocks, block_size,
// num_kv_heads, head_dim] through each sequence's block table.
//
//  - prefill_tc_kernel<D> (D = 64, 128): FlashAttention-2 style. One block = 64 query tokens of one
//    (sequence, query head); 4 warps, 16 query rows each. K/V tiles of 64 keys are gathered into shared
//    memory (cp.async, double-buffered); S = Q K^T and O += P V run on tensor cores (mma.sync m16n8k16,
//    bf16 in, fp32 accumulate); the online softmax stays in registers; key tiles past the causal
//    diagonal are never loaded. Query tiles of all sequences are numbered one after another, so a mixed
//    step launches no blocks for (short sequence, tile of the longest one).
//  - decode_tc_kernel<D, stages> (D = 64, 128): one block = one span of keys (a whole number of
//    kDecodePartitionTokens partitions) x one KV head x one sequence. The query heads of the GQA group
//    are the 16 rows of the MMA, so K/V are read once per group. Each 64-key chunk (cp.async pipeline of
//    2, 3 or 6 stages) is split between the 4 warps, 16 keys each; the warps merge in shared memory at
//    the end. With one span per sequence the block writes the output, otherwise it writes (max, sum,
//    unnormalised acc) to the workspace and decode_merge_kernel combines the spans (log-sum-exp). A
//    span is one partition unless the batch alone fills the GPU (see decode_spans): a graph captured
//    with many splits then does not launch thousands of blocks that find no keys.
//  - generic_kernel<P>: every other even head_dim up to 256, prefill and decode: one warp per (token,
//    head), fp32, one key at a time. For the tiny models; speed does not matter there.
//
// Scores are kept in the log2 domain (scaled by softmax_scale * log2(e)) so that exp2f does the softmax.
// q, out and the caches must be 16-byte aligned (cudaMalloc'd buffers are) for the 64/128 paths.
#include "pagoda/kernels/paged_attention.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/launch.cuh"

namespace pagoda::kernels {
namespace {

using bf16 = __nv_bfloat16;

constexpr float kLog2e = 1.4426950408889634f;
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kTileQ = 16 * kWarps;  // prefill: query rows per block, 16 per warp
constexpr int kTileK = 64;           // keys per shared-memory tile (prefill and decode)
// Decode cp.async pipeline depth: 3 stages (2 blocks per SM at head_dim 128) when the grid fills the GPU;
// 6 (one block per SM, ~170 KB of K/V in flight) when there are fewer blocks than SMs, e.g. batch 1; 2 on
// GPUs with less shared memory per block (sm_86/89).
constexpr int kDecodeStagesWide = 3;
constexpr int kDecodeStagesDeep = 6;
constexpr int kDecodeStagesSmall = 2;
constexpr int kDecodeRows = 16;      // decode: query heads per block (the MMA's M)
static_assert(kTileK == 16 * kWarps, "decode gives each warp 16 keys of a tile");

// Shared-memory row stride of a [rows, D] bf16 tile: 16 bytes of padding shift consecutive rows by four
// banks, so the eight rows read by one ldmatrix phase hit distinct banks.
template <int D>
constexpr int tile_ld() {
  return D + 8;
}

// ---------------------------------------------------------------------------------------------------
// PTX wrappers (sm_80+).

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(void* smem_dst, const void* gmem_src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(smem_dst)), "l"(gmem_src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, register i receives it
// (lane l holds row l/4, columns 2(l%4), 2(l%4)+1). `trans`: each matrix transposed on the way.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p))
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p))
               : "memory");
}

// d[16x8] += a[16x16] * b[16x8]. With g = lane/4, t = lane%4: a = {(g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..),
// (g+8, 2t+8..)}, b = {(k 2t..2t+1, n g), (k 2t+8.., n g)}, d = {(g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)}.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // lo in the low half
  return *reinterpret_cast<const uint32_t*>(&v);
}

// ---------------------------------------------------------------------------------------------------
// Tile helpers shared by the prefill and decode kernels. One warp owns 16 query rows; its fragments:
//   qf[D/16][4]   Q rows as MMA A operands, one per 16-dim k-step
//   s[NT][4]      scores of NT*8 keys (n-tile nt holds keys 8nt..8nt+7)
//   o[D/8][4]     output accumulator, n-tile dt holds dims 8dt..8dt+7
// Row r of the warp's 16 is held by lanes with lane/4 == r % 8, in elements 0-1 (r < 8) or 2-3 (r >= 8).

// Gathers rows [key0, key0 + kTileK) of one KV head into ks/vs ([kTileK][ld] bf16) with cp.async.
// Keys at or past key_end are zero-filled and never read from memory (nor their block ids).
template <int D>
__device__ __forceinline__ void load_kv_tile(bf16* ks, bf16* vs, const PagedAttentionParams& p,
                                             const int32_t* pages, int kvh, int key0, int key_end) {
  constexpr int kLd = tile_ld<D>();
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  static_assert(kThreads % kChunks == 0, "whole rows per pass");
  constexpr int kRowsPerPass = kThreads / kChunks;
  const int c = threadIdx.x % kChunks;
#pragma unroll
  for (int i = 0; i < kTileK / kRowsPerPass; ++i) {
    const int r = threadIdx.x / kChunks + i * kRowsPerPass;
    bf16* kd = ks + r * kLd + c * 8;
    bf16* vd = vs + r * kLd + c * 8;
    const int key = key0 + r;
    if (key < key_end) {
      const int64_t slot = static_cast<int64_t>(pages[key / p.block_size]) * p.block_size + key % p.block_size;
      const int64_t idx = (slot * p.num_kv_heads + kvh) * D + c * 8;
      cp_async16(kd, p.k_cache + idx);
      cp_async16(vd, p.v_cache + idx);
    } else {
      *reinterpret_cast<uint4*>(kd) = make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4*>(vd) = make_uint4(0, 0, 0, 0);
    }
  }
}

// Copies `rows` rows of D bf16 (row i at src + i * src_stride) into qs ([rows_total][ld]); rows past
// `rows` are zero-filled.
template <int D, int kRowsTotal>
__device__ __forceinline__ void load_q_tile(bf16* qs, const bf16* src, int64_t src_stride, int rows) {
  constexpr int kLd = tile_ld<D>();
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < kRowsTotal * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    bf16* dst = qs + r * kLd + c * 8;
    if (r < rows) {
      cp_async16(dst, src + r * src_stride + c * 8);
    } else {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
    }
  }
}

// A fragments of the 16 rows starting at qs (row stride ld).
template <int D>
__device__ __forceinline__ void load_q_frags(uint32_t (&qf)[D / 16][4], const bf16* qs, int lane) {
  constexpr int kLd = tile_ld<D>();
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) ldmatrix_x4(qf[kk], qs + (lane & 15) * kLd + kk * 16 + (lane >> 4) * 8);
}

// s[NT][4] = Q K^T for the NT*8 keys whose rows start at ks.
template <int D, int NT>
__device__ __forceinline__ void qk_tile(float (&s)[NT][4], const uint32_t (&qf)[D / 16][4], const bf16* ks,
                                        int lane) {
  constexpr int kLd = tile_ld<D>();
  static_assert(NT % 2 == 0, "keys in pairs of n-tiles");
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
  // Matrices of one ldmatrix.x4: (keys 0-7, dims 0-7), (keys 0-7, dims 8-15), (keys 8-15, dims 0-7),
  // (keys 8-15, dims 8-15) of a 16x16 block = the B operands of two n-tiles.
  const int key_in_pair = (lane & 7) + ((lane >> 4) << 3);
  const int dim_off = ((lane >> 3) & 1) * 8;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      uint32_t b[4];
      ldmatrix_x4(b, ks + (np * 16 + key_in_pair) * kLd + kk * 16 + dim_off);
      mma_bf16(s[2 * np], qf[kk], b[0], b[1]);
      mma_bf16(s[2 * np + 1], qf[kk], b[2], b[3]);
    }
  }
}

// Online softmax step: folds the (already scaled and masked) scores s into the running max m and
// per-thread partial sum l (per row: [0] row g, [1] row g+8), rescales o, and leaves exp2(s - max) in s.
// A row with no visible key so far keeps max -inf and contributes nothing.
template <int NT, int DT>
__device__ __forceinline__ void online_softmax(float (&s)[NT][4], float (&m)[2], float (&l)[2], float (&o)[DT][4]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float mx = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));  // the 4 lanes of a row
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m[r], mx);
    const float m_ref = m_new == -INFINITY ? 0.0f : m_new;  // avoids (-inf) - (-inf)
    const float alpha = exp2f(m[r] - m_ref);
    m[r] = m_new;
    float sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int e = 2 * r; e < 2 * r + 2; ++e) {
        s[nt][e] = exp2f(s[nt][e] - m_ref);
        sum += s[nt][e];
      }
    }
    l[r] = l[r] * alpha + sum;
#pragma unroll
    for (int dt = 0; dt < DT; ++dt) {
      o[dt][2 * r] *= alpha;
      o[dt][2 * r + 1] *= alpha;
    }
  }
}

// o += P V for the NT*8 keys whose value rows start at vs; P (= s after online_softmax) rounded to bf16.
template <int D, int NT>
__device__ __forceinline__ void pv_tile(float (&o)[D / 8][4], const float (&s)[NT][4], const bf16* vs, int lane) {
  constexpr int kLd = tile_ld<D>();
  // Matrices of one ldmatrix.x4.trans: (keys 0-7, dims 0-7), (keys 8-15, dims 0-7), (keys 0-7, dims 8-15),
  // (keys 8-15, dims 8-15), each transposed = the B operands of two dim n-tiles.
  const int key_off = (lane & 7) + ((lane >> 3) & 1) * 8;
  const int dim_off = (lane >> 4) * 8;
#pragma unroll
  for (int kk = 0; kk < NT / 2; ++kk) {  // 16 keys per k-step: score n-tiles 2kk and 2kk+1
    const uint32_t a[4] = {pack_bf16x2(s[2 * kk][0], s[2 * kk][1]), pack_bf16x2(s[2 * kk][2], s[2 * kk][3]),
                           pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                           pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, vs + (kk * 16 + key_off) * kLd + dp * 16 + dim_off);
      mma_bf16(o[2 * dp], a, b[0], b[1]);
      mma_bf16(o[2 * dp + 1], a, b[2], b[3]);
    }
  }
}

__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// ---------------------------------------------------------------------------------------------------
// Prefill, tensor cores. grid = (num_heads, query tiles bound, 1), 128 threads. The 64-row query tiles
// of all sequences are numbered sequence by sequence (blockIdx.y); blocks past the last tile exit. So a
// mixed step (many one-token sequences next to a long chunk) launches no block per (sequence, tile of
// the longest chunk). Within a sequence the last tile comes first: the longest causal rows start first.
template <int D>
constexpr size_t prefill_smem_bytes() {
  return static_cast<size_t>(kTileQ + 4 * kTileK) * tile_ld<D>() * sizeof(bf16);  // Q, 2 x K, 2 x V
}

// Block-wide: finds the sequence holding query tile `idx` (tiles numbered sequence by sequence, each
// sequence ceil(q_len / kTileQ) of them). found = {sequence, tile within it, the sequence's tile count},
// or found[0] = -1 when idx is past the last tile. One pass per kThreads sequences.
__device__ __forceinline__ void locate_query_tile(const int32_t* query_start, int num_seqs, int idx, int (&found)[3],
                                                  int (&warp_sums)[kWarps]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x == 0) found[0] = -1;
  int before = 0;  // tiles of the sequences of earlier passes
  for (int base = 0; base < num_seqs; base += kThreads) {
    const int si = base + threadIdx.x;
    const int count = si < num_seqs ? (query_start[si + 1] - query_start[si] + kTileQ - 1) / kTileQ : 0;
    int incl = count;  // inclusive prefix sum over the block
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += v;
    }
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    int pass_total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      if (w < warp) incl += warp_sums[w];
      pass_total += warp_sums[w];
    }
    const int first = before + incl - count;
    if (idx >= first && idx < first + count) {
      found[0] = si;
      found[1] = idx - first;
      found[2] = count;
    }
    before += pass_total;
    __syncthreads();
    if (found[0] >= 0) break;  // uniform: read after the barrier
  }
  __syncthreads();
}

template <int D>
__global__ void __launch_bounds__(kThreads) prefill_tc_kernel(const __grid_constant__ PagedAttentionParams p) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  constexpr int kLd = tile_ld<D>();
  constexpr int kTileElems = kTileK * kLd;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* qs = reinterpret_cast<bf16*>(smem_raw);  // [kTileQ][kLd]
  bf16* ks = qs + kTileQ * kLd;                  // [2][kTileK][kLd]
  bf16* vs = ks + 2 * kTileElems;                // [2][kTileK][kLd]
  __shared__ int found[3];
  __shared__ int warp_sums[kWarps];

  locate_query_tile(p.query_start, p.num_seqs, blockIdx.y, found, warp_sums);
  if (found[0] < 0) return;
  const int h = blockIdx.x;
  const int s = found[0];
  const int m0 = (found[2] - 1 - found[1]) * kTileQ;  // first query row of the tile, within the sequence
  const int q_begin = p.query_start[s];
  const int q_len = p.query_start[s + 1] - q_begin;
  const int rows = min(kTileQ, q_len - m0);
  const int seq_len = p.seq_lens[s];
  const int64_t row_stride = static_cast<int64_t>(p.num_heads) * D;  // between tokens in q and out
  bf16* out = p.out + (q_begin + m0) * row_stride + h * D;             // row r at out + r * row_stride
  if (seq_len <= 0) {  // padding sequence
    for (int i = threadIdx.x; i < rows * (D / 2); i += kThreads) {
      reinterpret_cast<uint32_t*>(out + (i / (D / 2)) * row_stride)[i % (D / 2)] = 0u;
    }
    return;
  }
  const int ctx = seq_len - q_len;                         // keys before this chunk; row r sits at ctx + m0 + r
  const int key_end = min(seq_len, ctx + m0 + rows);       // keys visible to some row of the tile
  const int n_tiles = (max(key_end, 0) + kTileK - 1) / kTileK;
  const int kvh = h / (p.num_heads / p.num_kv_heads);
  const int32_t* pages = p.kv_pages + p.kv_page_start[s];

  load_q_tile<D, kTileQ>(qs, p.q + (q_begin + m0) * row_stride + h * D, row_stride, rows);
  if (n_tiles > 0) load_kv_tile<D>(ks, vs, p, pages, kvh, 0, key_end);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  uint32_t qf[D / 16][4];
  load_q_frags<D>(qf, qs + warp * 16 * kLd, lane);
  const bool warp_active = warp * 16 < rows;     // warp-uniform: some of its rows are real
  const int warp_pos = ctx + m0 + warp * 16;     // position of the warp's first row
  const float scale = p.scale * kLog2e;

  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  for (int j = 0; j < n_tiles; ++j) {
    const int stage = j & 1;
    if (j + 1 < n_tiles) {  // prefetch the next tile into the other stage (freed by the last barrier)
      load_kv_tile<D>(ks + (stage ^ 1) * kTileElems, vs + (stage ^ 1) * kTileElems, p, pages, kvh,
                      (j + 1) * kTileK, key_end);
    }
    cp_async_commit();
    if (warp_active) {
      float sc[kTileK / 8][4];
      qk_tile<D, kTileK / 8>(sc, qf, ks + stage * kTileElems, lane);
      const int key0 = j * kTileK;
      // Causal mask only where some key of the tile lies past some row's position (the diagonal tiles,
      // which also hold the zero-filled keys past key_end).
      const bool masked = key0 + kTileK - 1 > warp_pos;
#pragma unroll
      for (int nt = 0; nt < kTileK / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + nt * 8 + 2 * t + (e & 1);
          const int pos = warp_pos + g + (e >> 1) * 8;
          sc[nt][e] = masked && key > pos ? -INFINITY : sc[nt][e] * scale;
        }
      }
      online_softmax<kTileK / 8, D / 8>(sc, m, l, o);
      pv_tile<D, kTileK / 8>(o, sc, vs + stage * kTileElems, lane);
    }
    cp_async_wait<0>();
    __syncthreads();
  }

  if (!warp_active) return;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float sum = quad_sum(l[r]);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const int row = warp * 16 + g + 8 * r;
    if (row >= rows) continue;
    uint32_t* dst = reinterpret_cast<uint32_t*>(out + row * row_stride);
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) dst[dt * 4 + t] = pack_bf16x2(o[dt][2 * r] * inv, o[dt][2 * r + 1] * inv);
  }
}

// ---------------------------------------------------------------------------------------------------
// Decode, tensor cores. grid = (num_spans, num_kv_heads * ceil(group / 16), num_seqs), 128 threads; block
// x covers keys [x * span, (x + 1) * span). Workspace (num_spans > 1): acc [num_seqs, num_heads,
// num_spans, D] fp32, then ml [num_seqs, num_heads, num_spans] float2 (running max in log2 units, sum of
// exp2). num_spans <= num_splits, so paged_attention_decode_workspace_bytes covers it.
template <int D>
constexpr size_t decode_stage_elems() {
  return static_cast<size_t>(2) * kTileK * tile_ld<D>();  // K and V of one chunk
}
template <int D>
constexpr int decode_red_ld() {
  return D + 4;
}
template <int D>
constexpr size_t decode_red_bytes() {  // cross-warp merge buffers, aliasing the pipeline stages
  return (static_cast<size_t>(kWarps) * kDecodeRows * decode_red_ld<D>() + 3 * kWarps * kDecodeRows +
          2 * kDecodeRows) * sizeof(float);
}
template <int D, int kStages>
constexpr size_t decode_smem_bytes() {
  return (static_cast<size_t>(kDecodeRows) * tile_ld<D>() + kStages * decode_stage_elems<D>()) * sizeof(bf16);
}

template <int D, int kStages>
__global__ void __launch_bounds__(kThreads, 2)
    decode_tc_kernel(const __grid_constant__ PagedAttentionParams p, int span, float* ws_acc, float2* ws_ml) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  constexpr int kLd = tile_ld<D>();
  static_assert(decode_red_bytes<D>() <= kStages * decode_stage_elems<D>() * sizeof(bf16),
                "merge buffers fit in the stages");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* qs = reinterpret_cast<bf16*>(smem_raw);  // [16][kLd]
  bf16* stages = qs + kDecodeRows * kLd;         // [kStages][K, V][kTileK][kLd]

  const int split = blockIdx.x;
  const int num_spans = gridDim.x;
  const int s = blockIdx.z;
  const int group = p.num_heads / p.num_kv_heads;
  const int row_tiles = (group + kDecodeRows - 1) / kDecodeRows;
  const int kvh = blockIdx.y / row_tiles;
  const int head0 = kvh * group + (blockIdx.y % row_tiles) * kDecodeRows;  // query head of row 0
  const int rows = min(kDecodeRows, (kvh + 1) * group - head0);
  const int token = p.query_start[s];
  const int seq_len = p.seq_lens[s];
  const int k_begin = split * span;
  bf16* out = p.out + (static_cast<int64_t>(token) * p.num_heads + head0) * D;  // row r at out + r * D
  if (k_begin >= seq_len) {  // span past the end; with one span this is a padding sequence
    if (num_spans == 1) {
      for (int i = threadIdx.x; i < rows * (D / 2); i += kThreads) reinterpret_cast<uint32_t*>(out)[i] = 0u;
    }
    return;
  }
  const int k_end = min(seq_len, k_begin + span);
  const int n_chunks = (k_end - k_begin + kTileK - 1) / kTileK;
  const int32_t* pages = p.kv_pages + p.kv_page_start[s];
  auto stage_k = [&](int i) { return stages + (i % kStages) * decode_stage_elems<D>(); };
  auto stage_v = [&](int i) { return stage_k(i) + kTileK * kLd; };

  load_q_tile<D, kDecodeRows>(qs, p.q + (static_cast<int64_t>(token) * p.num_heads + head0) * D, D, rows);
#pragma unroll
  for (int c = 0; c < kStages - 1; ++c) {  // Q rides in group 0 with chunk 0
    if (c < n_chunks) load_kv_tile<D>(stage_k(c), stage_v(c), p, pages, kvh, k_begin + c * kTileK, k_end);
    cp_async_commit();
  }
  cp_async_wait<kStages - 2>();
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  uint32_t qf[D / 16][4];
  load_q_frags<D>(qf, qs, lane);
  const float scale = p.scale * kLog2e;
  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  for (int j = 0; j < n_chunks; ++j) {
    const int next = j + kStages - 1;  // its stage was last read in iteration j - 1
    if (next < n_chunks) load_kv_tile<D>(stage_k(next), stage_v(next), p, pages, kvh, k_begin + next * kTileK, k_end);
    cp_async_commit();  // always, so that group j + 1 is complete after the wait below
    const int key0 = k_begin + j * kTileK + warp * 16;  // this warp's 16 keys of the chunk
    if (key0 < k_end) {
      float sc[2][4];
      qk_tile<D, 2>(sc, qf, stage_k(j) + warp * 16 * kLd, lane);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + nt * 8 + 2 * t + (e & 1);
          sc[nt][e] = key < k_end ? sc[nt][e] * scale : -INFINITY;
        }
      }
      online_softmax<2, D / 8>(sc, m, l, o);
      pv_tile<D, 2>(o, sc, stage_v(j) + warp * 16 * kLd, lane);
    }
    cp_async_wait<kStages - 2>();
    __syncthreads();
  }
  cp_async_wait<0>();  // only empty groups can be pending; the stages are free after this barrier
  __syncthreads();

  // Merge the four warps: red_o [warp][row][D + 4], red_m / red_l / red_w [warp][row], row_m / row_l [row].
  constexpr int kRedLd = decode_red_ld<D>();
  float* red_o = reinterpret_cast<float*>(stages);
  float* red_m = red_o + kWarps * kDecodeRows * kRedLd;
  float* red_l = red_m + kWarps * kDecodeRows;
  float* red_w = red_l + kWarps * kDecodeRows;
  float* row_m = red_w + kWarps * kDecodeRows;
  float* row_l = row_m + kDecodeRows;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    const float sum = quad_sum(l[r]);
    if (t == 0) {
      red_m[warp * kDecodeRows + row] = m[r];
      red_l[warp * kDecodeRows + row] = sum;
    }
    float* dst = red_o + (warp * kDecodeRows + row) * kRedLd;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      *reinterpret_cast<float2*>(dst + dt * 8 + 2 * t) = make_float2(o[dt][2 * r], o[dt][2 * r + 1]);
    }
  }
  __syncthreads();
  if (threadIdx.x < kDecodeRows) {
    const int row = threadIdx.x;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, red_m[w * kDecodeRows + row]);
    const float m_ref = mx == -INFINITY ? 0.0f : mx;
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float wt = exp2f(red_m[w * kDecodeRows + row] - m_ref);
      red_w[w * kDecodeRows + row] = wt;
      sum += red_l[w * kDecodeRows + row] * wt;
    }
    row_m[row] = mx;
    row_l[row] = sum;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < rows * (D / 2); i += kThreads) {
    const int row = i / (D / 2), d = (i % (D / 2)) * 2;
    float2 acc = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float wt = red_w[w * kDecodeRows + row];
      const float2 v = *reinterpret_cast<const float2*>(red_o + (w * kDecodeRows + row) * kRedLd + d);
      acc.x += wt * v.x;
      acc.y += wt * v.y;
    }
    if (num_spans == 1) {
      const float inv = row_l[row] > 0.0f ? 1.0f / row_l[row] : 0.0f;
      reinterpret_cast<uint32_t*>(out + row * D)[d / 2] = pack_bf16x2(acc.x * inv, acc.y * inv);
    } else {
      const int64_t part = (static_cast<int64_t>(s) * p.num_heads + head0 + row) * num_spans + split;
      *reinterpret_cast<float2*>(ws_acc + part * D + d) = acc;
      if (d == 0) ws_ml[part] = make_float2(row_m[row], row_l[row]);
    }
  }
}

// Combines the spans of one (sequence, head). grid = (num_heads, num_seqs), D / 2 threads.
template <int D>
__global__ void __launch_bounds__(D / 2)
    decode_merge_kernel(const __grid_constant__ PagedAttentionParams p, int num_spans, int span, const float* ws_acc,
                        const float2* ws_ml) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  const int h = blockIdx.x;
  const int s = blockIdx.y;
  const int seq_len = p.seq_lens[s];
  // Spans that hold keys; the others were never written.
  const int n = min(num_spans, (max(seq_len, 0) + span - 1) / span);
  const int64_t part0 = (static_cast<int64_t>(s) * p.num_heads + h) * num_spans;
  float mx = -INFINITY;
  for (int i = 0; i < n; ++i) mx = fmaxf(mx, ws_ml[part0 + i].x);
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += ws_ml[part0 + i].y * exp2f(ws_ml[part0 + i].x - mx);
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;  // n == 0 (padding): zeros
  const int d = threadIdx.x * 2;
  float2 acc = make_float2(0.0f, 0.0f);
  for (int i = 0; i < n; ++i) {
    const float wt = exp2f(ws_ml[part0 + i].x - mx);
    const float2 v = *reinterpret_cast<const float2*>(ws_acc + (part0 + i) * D + d);
    acc.x += wt * v.x;
    acc.y += wt * v.y;
  }
  bf16* out = p.out + (static_cast<int64_t>(p.query_start[s]) * p.num_heads + h) * D;
  reinterpret_cast<uint32_t*>(out)[threadIdx.x] = pack_bf16x2(acc.x * inv, acc.y * inv);
}

// ---------------------------------------------------------------------------------------------------
// Any even head_dim <= 64 * P: one warp per (token, query head), lane i holds dim pairs i, i + 32, ...
// grid = (num_tokens, ceil(num_heads / 4)), 128 threads. `decode`: token t is sequence t (token_seq unused).
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
      const int64_t base = ((page_slot0 + off) * p.num_kv_heads + kvh) * half;  // in bf16 pairs
      const __nv_bfloat162* k2 = reinterpret_cast<const __nv_bfloat162*>(p.k_cache) + base;
      const __nv_bfloat162* v2 = reinterpret_cast<const __nv_bfloat162*>(p.v_cache) + base;
      float dot = 0.0f;
#pragma unroll
      for (int k = 0; k < P; ++k) {
        const int i = lane + 32 * k;
        if (i < half) {
          const float2 kv = __bfloat1622float2(k2[i]);
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
        const float2 vv = i < half ? __bfloat1622float2(v2[i]) : make_float2(0.0f, 0.0f);
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

// ---------------------------------------------------------------------------------------------------
// Host side.

void check_params(const PagedAttentionParams& p, const char* what) {
  const bool ok = p.head_dim > 0 && p.head_dim % 2 == 0 && p.head_dim <= 256 && p.num_heads > 0 &&
                  p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads == 0 && p.block_size > 0;
  if (!ok) throw_cuda_error(cudaErrorInvalidValue, what, __FILE__, __LINE__);
}

// Dynamic shared memory above 48 KiB must be allowed per kernel and device; done once for each (a bit
// per device in `configured`).
template <typename Kernel>
void allow_smem(Kernel* kernel, size_t bytes, std::atomic<uint64_t>& configured) {
  int device = 0;
  PAGODA_CUDA_CHECK(cudaGetDevice(&device));
  const uint64_t bit = uint64_t{1} << (device & 63);
  if (configured.load(std::memory_order_acquire) & bit) return;
  PAGODA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  configured.fetch_or(bit, std::memory_order_release);
}

template <int D>
void launch_prefill_tc(const PagedAttentionParams& p, cudaStream_t stream) {
  static std::atomic<uint64_t> configured{0};
  constexpr size_t smem = prefill_smem_bytes<D>();
  allow_smem(prefill_tc_kernel<D>, smem, configured);
  // Upper bound of sum over sequences of ceil(q_len / kTileQ).
  const int64_t tiles = std::min<int64_t>(static_cast<int64_t>(p.num_seqs) * ((p.max_query_len + kTileQ - 1) / kTileQ),
                                          (p.num_tokens + kTileQ - 1) / kTileQ + static_cast<int64_t>(p.num_seqs));
  if (tiles > 65535) throw_cuda_error(cudaErrorInvalidValue, "paged_attention_prefill: too many query tiles", __FILE__, __LINE__);
  const dim3 grid(p.num_heads, static_cast<unsigned>(tiles), 1);
  launch_kernel("paged_attention_prefill (tensor cores)", prefill_tc_kernel<D>, grid, kThreads, smem, stream, p);
}

struct DeviceLimits {
  int num_sms = 0;
  int max_smem_per_block = 0;  // opt-in dynamic shared memory
};
// Queried once per device.
DeviceLimits device_limits() {
  static std::atomic<int> cached_sms[64] = {};
  static std::atomic<int> cached_smem[64] = {};
  int device = 0;
  PAGODA_CUDA_CHECK(cudaGetDevice(&device));
  DeviceLimits l{cached_sms[device & 63].load(std::memory_order_relaxed),
                 cached_smem[device & 63].load(std::memory_order_relaxed)};
  if (l.num_sms == 0 || l.max_smem_per_block == 0) {
    PAGODA_CUDA_CHECK(cudaDeviceGetAttribute(&l.num_sms, cudaDevAttrMultiProcessorCount, device));
    PAGODA_CUDA_CHECK(cudaDeviceGetAttribute(&l.max_smem_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    cached_smem[device & 63].store(l.max_smem_per_block, std::memory_order_relaxed);
    cached_sms[device & 63].store(l.num_sms, std::memory_order_relaxed);
  }
  return l;
}

// Decode work split: `num_spans` blocks per (sequence, KV head row tile), each covering `span` keys (a
// whole number of partitions). One partition per block when the batch leaves the GPU idle; when the
// batch alone makes about 4 blocks per SM, fewer and longer spans (often one: no merge), so that a graph
// captured with the largest split count does not launch blocks past every sequence's end. Depends on
// host values only (graph-safe); coverage num_spans * span >= num_splits * kDecodePartitionTokens.
struct DecodeSpans {
  int num_spans, span;
};
DecodeSpans decode_spans(int num_splits, int blocks_per_span) {
  const int target_blocks = 4 * device_limits().num_sms;
  const int wanted = std::max(1, (target_blocks + blocks_per_span - 1) / blocks_per_span);
  const int parts_per_span = (num_splits + std::min(num_splits, wanted) - 1) / std::min(num_splits, wanted);
  return {(num_splits + parts_per_span - 1) / parts_per_span, parts_per_span * kDecodePartitionTokens};
}

template <int D, int kStages>
void launch_decode_blocks(const PagedAttentionParams& p, dim3 grid, int span, float* ws_acc, float2* ws_ml,
                          cudaStream_t stream) {
  static std::atomic<uint64_t> configured{0};
  constexpr size_t smem = decode_smem_bytes<D, kStages>();
  allow_smem(decode_tc_kernel<D, kStages>, smem, configured);
  launch_kernel("paged_attention_decode (tensor cores)", decode_tc_kernel<D, kStages>, grid, kThreads, smem, stream, p,
                span, ws_acc, ws_ml);
}

template <int D>
void launch_decode_tc(const PagedAttentionParams& p, int num_splits, void* workspace, cudaStream_t stream) {
  const int group = p.num_heads / p.num_kv_heads;
  const int row_tiles = (group + kDecodeRows - 1) / kDecodeRows;
  const DecodeSpans spans = decode_spans(num_splits, p.num_kv_heads * row_tiles * p.num_seqs);
  float* ws_acc = static_cast<float*>(workspace);
  float2* ws_ml = nullptr;
  if (spans.num_spans > 1) {
    if (workspace == nullptr) throw_cuda_error(cudaErrorInvalidValue, "paged_attention_decode: no workspace", __FILE__, __LINE__);
    ws_ml = reinterpret_cast<float2*>(ws_acc + static_cast<size_t>(p.num_seqs) * p.num_heads * spans.num_spans * D);
  }
  const dim3 grid(spans.num_spans, p.num_kv_heads * row_tiles, p.num_seqs);
  const DeviceLimits limits = device_limits();
  const auto fits = [&](size_t bytes) { return bytes <= static_cast<size_t>(limits.max_smem_per_block); };
  const int64_t blocks = static_cast<int64_t>(grid.x) * grid.y * grid.z;
  if (blocks <= limits.num_sms && fits(decode_smem_bytes<D, kDecodeStagesDeep>())) {
    launch_decode_blocks<D, kDecodeStagesDeep>(p, grid, spans.span, ws_acc, ws_ml, stream);
  } else if (fits(decode_smem_bytes<D, kDecodeStagesWide>())) {
    launch_decode_blocks<D, kDecodeStagesWide>(p, grid, spans.span, ws_acc, ws_ml, stream);
  } else {
    launch_decode_blocks<D, kDecodeStagesSmall>(p, grid, spans.span, ws_acc, ws_ml, stream);
  }
  if (spans.num_spans > 1) {
    launch_kernel("paged_attention_decode (merge)", decode_merge_kernel<D>, dim3(p.num_heads, p.num_seqs), D / 2, 0,
                  stream, p, spans.num_spans, spans.span, static_cast<const float*>(ws_acc), static_cast<const float2*>(ws_ml));
  }
}

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

}  // namespace

void paged_attention_prefill(const PagedAttentionParams& p, cudaStream_t stream) {
  if (p.num_tokens <= 0 || p.num_seqs <= 0 || p.max_query_len <= 0) return;
  check_params(p, "paged_attention_prefill: bad shape");
  if (p.head_dim == 128) {
    launch_prefill_tc<128>(p, stream);
  } else if (p.head_dim == 64) {
    launch_prefill_tc<64>(p, stream);
  } else {
    launch_generic(p, /*decode=*/false, stream);
  }
}

int decode_num_splits(int max_seq_len) {
  return max_seq_len <= kDecodePartitionTokens ? 1 : (max_seq_len + kDecodePartitionTokens - 1) / kDecodePartitionTokens;
}

size_t paged_attention_decode_workspace_bytes(int num_seqs, int num_heads, int head_dim, int num_splits) {
  // decode_spans never makes more spans than num_splits, nor more than it takes to fill the GPU with at
  // least num_seqs blocks per span: a bound that stays small for long max_model_len.
  const int64_t target_blocks = 4 * static_cast<int64_t>(device_limits().num_sms);
  const int64_t spans = std::min<int64_t>(num_splits, std::max<int64_t>(1, (target_blocks + num_seqs - 1) / std::max(num_seqs, 1)));
  return static_cast<size_t>(num_seqs) * num_heads * spans * (head_dim + 2) * sizeof(float);
}

void paged_attention_decode(const PagedAttentionParams& p, int num_splits, void* workspace, cudaStream_t stream) {
  if (p.num_seqs <= 0) return;
  check_params(p, "paged_attention_decode: bad shape");
  if (num_splits < decode_num_splits(p.max_seq_len)) {
    throw_cuda_error(cudaErrorInvalidValue, "paged_attention_decode: num_splits below decode_num_splits(max_seq_len)",
                     __FILE__, __LINE__);
  }
  if (p.head_dim == 128) {
    launch_decode_tc<128>(p, num_splits, workspace, stream);
  } else if (p.head_dim == 64) {
    launch_decode_tc<64>(p, num_splits, workspace, stream);
  } else {
    launch_generic(p, /*decode=*/true, stream);
  }
}

}  // namespace pagoda::kernels
