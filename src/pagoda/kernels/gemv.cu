// Skinny GEMM (gemv.h): out [T, N] = x [T, K] · w [N, K]^T for T <= 8 tokens, the decode hot path.
//
// The kernel is bound by reading w once from HBM, so everything serves that stream:
//  - a warp owns R output rows (a "row group") and walks them along K; lane l reads the 16-byte vectors
//    l, l + 32, ... of each row, so one warp instruction fetches 512 contiguous bytes per row;
//  - U * R such loads are issued back to back before any is used (U chunks of 32 vectors), which keeps
//    ~128 bytes per thread in flight; the loads skip L1 (no reuse) and ask L2 for 256-byte prefetches;
//  - x [T, K] is tiny and shared by every warp: it is read through L1 (ld.global.nc), one 16-byte vector
//    per token per chunk, and reused for the R rows, so L1 serves T / R bytes per weight byte;
//  - fp32 FMAs per lane, then a warp-shuffle sum. When N / R alone gives too few warps to fill the GPU
//    (N = 1024 for K/V), the warps of a block split K between them and add their sums in shared memory.
// R and U depend on T (more rows per warp when there are more tokens, to keep x traffic and registers in
// check): T = 1: 1 x 8; T = 2..4: 2 x 4; T = 5..8: 4 x 2 (R x U, 8 loads in flight per lane).
// Epilogues (Epilogue): plain bf16 outputs; SwiGLU of row pairs (gate_j, up_j), so the gate-up GEMM writes
// the activation; RoPE of Q/K row pairs with the KV-cache store, so the QKV GEMM writes q and the cache.
// The pair forms keep both rows of a pair in one warp (R >= 2).
// For T <= 2 the first chunk's weight loads are issued before the PDL wait, overlapping the kernel before;
// a plain GEMM at T = 1 with two chunks a warp (K = 4096) issues both there.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/gemm_epilogue.cuh"
#include "pagoda/kernels/gemv.h"
#include "pagoda/kernels/launch.cuh"
#include "pagoda/kernels/weight_loads.cuh"

namespace pagoda::kernels {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kWarps = 4;  // per block; small blocks schedule evenly over the SMs
constexpr int kThreads = kWarps * 32;
constexpr int kVec = 8;                 // bf16 per 16-byte vector
constexpr int kLoadsPerLane = 8;        // R * U: 16-byte weight loads in flight per lane
constexpr int64_t kTargetWarps = 2048;  // ~16 warps for each of the 132 SMs of an H200
constexpr int kMinVecsPerLane = 4;      // a K slice is at least this many vectors per lane

constexpr int rows_per_warp(int t) { return t == 1 ? 1 : (t <= 4 ? 2 : 4); }

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }


// 8 bf16 widened to fp32 (a bf16 is the top half of an fp32: exact).
__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[kVec]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    f[2 * j] = __uint_as_float(w[j] << 16);
    f[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
  }
}

// acc[t][r] += x[t, 8i .. 8i+8) · wv[r]: one 16-byte vector of each of the R rows at vector index i.
template <int T, int R>
__device__ __forceinline__ void fma_vector(float (&acc)[T][R], const uint4 (&wv)[R], const uint4* __restrict__ x,
                                           int kv, int i) {
  float wf[R][kVec];
#pragma unroll
  for (int r = 0; r < R; ++r) unpack8(wv[r], wf[r]);
#pragma unroll
  for (int t = 0; t < T; ++t) {
    float xf[kVec];
    unpack8(__ldg(x + static_cast<int64_t>(t) * kv + i), xf);
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) acc[t][r] = fmaf(xf[j], wf[r][j], acc[t][r]);
    }
  }
}

// wv[u][r] = the 16-byte vector base + 32 u + lane of row r: one chunk of a warp's weights.
template <int U, int R>
__device__ __forceinline__ void load_chunk(uint4 (&wv)[U][R], const uint4* const (&wr)[R], int base, int lane) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
#pragma unroll
    for (int r = 0; r < R; ++r) wv[u][r] = load_weights(wr[r] + base + u * 32 + lane);
  }
}

// Up to this many tokens the first chunk of weights is loaded before the PDL wait (see the kernel).
// Measured on the H200 (Llama-3-8B, batch 1, 128 keys of context): a decode step took 4.02 ms instead of
// 4.21. Larger T is left as it was: the standalone GEMMs at T = 4 and 8 were mostly slower with it.
constexpr int kPreloadMaxTokens = 2;

// out [T, N], x [T, K], w [N, K]; K % 8 == 0 and x, w 16-byte aligned. Block = kWarps warps = (kWarps /
// splits) row groups of R rows, each group's K cut into `splits` slices (one warp per slice).
// E: what happens to the outputs (Epilogue); the pair forms need R even.
template <int T, int R, int U, Epilogue E>
__global__ void __launch_bounds__(kThreads)
    skinny_gemm_kernel(bf16* __restrict__ out, const bf16* __restrict__ x, const bf16* __restrict__ w, int n, int k,
                       int splits, const QkvRopeOutput rope) {
  constexpr bool kPairs = E != Epilogue::kPlain;
  // Weights are never written by a kernel of the step, so the first chunk of them may be read before the
  // PDL wait: its loads overlap the end of the previous kernel (a norm, attention, or the previous GEMM's
  // tail), when HBM is otherwise idle. x and every output only after the wait.
  constexpr bool kPreload = T <= kPreloadMaxTokens;
  if constexpr (!kPreload) pdl_grid_sync();  // before any global memory access (launch.cuh)
  bool waited = !kPreload;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int slice = warp % splits;
  const int row0 = (blockIdx.x * (kWarps / splits) + warp / splits) * R;
  const int kv = k / kVec;  // 16-byte vectors per row
  const int begin = static_cast<int>(static_cast<int64_t>(kv) * slice / splits);
  const int end = static_cast<int>(static_cast<int64_t>(kv) * (slice + 1) / splits);

  const uint4* xv = reinterpret_cast<const uint4*>(x);
  const uint4* wr[R];  // rows past N read row N - 1 (never stored) so the warp stays uniform
#pragma unroll
  for (int r = 0; r < R; ++r)
    wr[r] = reinterpret_cast<const uint4*>(w) + static_cast<int64_t>(min(row0 + r, n - 1)) * kv;

  float acc[T][R];
#pragma unroll
  for (int t = 0; t < T; ++t) {
#pragma unroll
    for (int r = 0; r < R; ++r) acc[t][r] = 0.0f;
  }

  int base = begin;  // warp-uniform: chunks of U * 32 vectors
  for (; base + U * 32 <= end; base += U * 32) {
    uint4 wv[U][R];
    load_chunk<U, R>(wv, wr, base, lane);
    if (!waited) {
      pdl_grid_sync();
      waited = true;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) fma_vector<T, R>(acc, wv[u], xv, kv, base + u * 32 + lane);
  }
  if (!waited) pdl_grid_sync();  // no whole chunk
  if (base < end) {  // the last, partial chunk: guarded loads, still all issued before use
    uint4 wv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = base + u * 32 + lane;
#pragma unroll
      for (int r = 0; r < R; ++r) wv[u][r] = i < end ? load_weights(wr[r] + i) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = base + u * 32 + lane;
      if (i < end) fma_vector<T, R>(acc, wv[u], xv, kv, i);
    }
  }

#pragma unroll
  for (int t = 0; t < T; ++t) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) acc[t][r] += __shfl_xor_sync(0xffffffffu, acc[t][r], off);
    }
  }

  if (splits == 1) {  // uniform over the block
    if (lane == 0) {
#pragma unroll
      for (int t = 0; t < T; ++t) {
#pragma unroll
        for (int r = 0; r < R; r += kPairs ? 2 : 1) {
          if constexpr (kPairs) {
            store_rows<E>(out, rope, n, t, row0 + r, acc[t][r], acc[t][r + 1]);
          } else {
            store_rows<E>(out, rope, n, t, row0 + r, acc[t][r], 0.0f);
          }
        }
      }
    }
    return;
  }

  __shared__ float partial[kWarps][T * R];  // [warp][t * R + r]: each slice's sums
  if (lane == 0) {
#pragma unroll
    for (int t = 0; t < T; ++t) {
#pragma unroll
      for (int r = 0; r < R; ++r) partial[warp][t * R + r] = acc[t][r];
    }
  }
  __syncthreads();
  if (slice == 0) {  // warps warp .. warp + splits - 1 hold this group's slices
    float sum = 0.0f;
    if (lane < T * R) {
      for (int s = 0; s < splits; ++s) sum += partial[warp + s][lane];
    }
    const int t = lane / R;
    const int row = row0 + lane % R;
    const float next = __shfl_down_sync(0xffffffffu, sum, 1);  // lane t * R + r + 1 holds row r + 1
    if (lane < T * R && (!kPairs || lane % 2 == 0)) store_rows<E>(out, rope, n, t, row, sum, next);
  }
}

template <int T, Epilogue E>
void launch(bf16* out, const bf16* x, const bf16* w, int n, int k, const QkvRopeOutput& rope, cudaStream_t stream) {
  constexpr int R = E != Epilogue::kPlain ? std::max(2, rows_per_warp(T)) : rows_per_warp(T);  // pairs in a warp
  constexpr int U = kLoadsPerLane / R;
  const int64_t groups = (static_cast<int64_t>(n) + R - 1) / R;
  const int kv = k / kVec;
  // Split K only while the GPU is short of warps and each slice stays long. The SwiGLU form at T = 1 (two
  // rows a warp where the plain kernel has one) starts at two slices: measured on the H200, a Llama-3-8B
  // step took 4.205 ms instead of 4.251; the same for the QKV + RoPE form was slower (4.287).
  int splits = E == Epilogue::kSilu && T == 1 ? 2 : 1;
  while (splits < kWarps && groups * splits < kTargetWarps && kv / (2 * splits) >= kMinVecsPerLane * 32) splits *= 2;
  const int64_t groups_per_block = kWarps / splits;
  const int64_t blocks = (groups + groups_per_block - 1) / groups_per_block;
  constexpr const char* name = E == Epilogue::kPlain  ? "skinny_gemm"
                               : E == Epilogue::kSilu ? "skinny_gemm_silu"
                                                      : "skinny_gemm_qkv_rope";
  // A plain GEMM at one token whose warps hold exactly two chunks of a row (K = 4096: o_proj and lm_head of
  // Llama-3-8B) loads both before the PDL wait, so all of a resident warp's weights are in flight while the
  // kernel before it (attention, for o_proj) leaves HBM idle. Measured on the H200 (Llama-3-8B, batch 1, one
  // call): 245.8 -> 247.0 tok/s at 128 context, 239.0 -> 241.4 at 2,048; lm_head with or without it: the
  // same. The QKV + RoPE GEMM loading half its row that way lost (237.3), and so did every GEMM keeping
  // 16 loads in flight throughout (bench/results/2026-11-29-h200-decode-experiments.json, runs 17, 23, 24).
  auto* kernel = skinny_gemm_kernel<T, R, U, E>;
  if constexpr (T == 1 && E == Epilogue::kPlain) {
    if (kv == 2 * U * 32 && splits == 1) kernel = skinny_gemm_kernel<T, R, 2 * U, E>;  // both chunks as one
  }
  launch_kernel(name, kernel, static_cast<unsigned>(blocks), kThreads, 0, stream, out, x, w, n, k, splits, rope);
}

}  // namespace

bool skinny_gemm_supported(const void* x, const void* w, int num_tokens, int n, int k) {
  return num_tokens >= 1 && num_tokens <= kSkinnyGemmMaxTokens && n >= 0 && k >= 0 && k % kVec == 0 &&
         aligned16(x) && aligned16(w);
}

namespace {
template <Epilogue E>
void dispatch(bf16* out, const bf16* x, const bf16* w, int num_tokens, int n, int k, const QkvRopeOutput& rope,
              cudaStream_t stream) {
  switch (num_tokens) {
    case 1: launch<1, E>(out, x, w, n, k, rope, stream); break;
    case 2: launch<2, E>(out, x, w, n, k, rope, stream); break;
    case 3: launch<3, E>(out, x, w, n, k, rope, stream); break;
    case 4: launch<4, E>(out, x, w, n, k, rope, stream); break;
    case 5: launch<5, E>(out, x, w, n, k, rope, stream); break;
    case 6: launch<6, E>(out, x, w, n, k, rope, stream); break;
    case 7: launch<7, E>(out, x, w, n, k, rope, stream); break;
    default: launch<8, E>(out, x, w, n, k, rope, stream); break;
  }
}
}  // namespace

void skinny_gemm(bf16* out, const bf16* x, const bf16* w, int num_tokens, int n, int k, cudaStream_t stream) {
  if (num_tokens <= 0 || n <= 0) return;
  if (!skinny_gemm_supported(x, w, num_tokens, n, k))
    throw_cuda_error(cudaErrorInvalidValue, "skinny_gemm: shape or alignment not supported", __FILE__, __LINE__);
  dispatch<Epilogue::kPlain>(out, x, w, num_tokens, n, k, QkvRopeOutput{}, stream);
}

void skinny_gemm_silu(bf16* out, const bf16* x, const bf16* w_gate_up, int num_tokens, int intermediate, int k,
                      cudaStream_t stream) {
  if (num_tokens <= 0 || intermediate <= 0) return;
  if (!skinny_gemm_supported(x, w_gate_up, num_tokens, 2 * intermediate, k))
    throw_cuda_error(cudaErrorInvalidValue, "skinny_gemm_silu: shape or alignment not supported", __FILE__, __LINE__);
  dispatch<Epilogue::kSilu>(out, x, w_gate_up, num_tokens, 2 * intermediate, k,
                            QkvRopeOutput{}, stream);
}

void skinny_gemm_qkv_rope(const QkvRopeOutput& o, const bf16* x, const bf16* w_qkv, int num_tokens, int k,
                          cudaStream_t stream) {
  const int n = (o.num_heads + 2 * o.num_kv_heads) * o.head_dim;
  if (num_tokens <= 0 || n <= 0) return;
  if (!skinny_gemm_supported(x, w_qkv, num_tokens, n, k) || o.head_dim % 2 != 0)
    throw_cuda_error(cudaErrorInvalidValue, "skinny_gemm_qkv_rope: shape or alignment not supported", __FILE__,
                     __LINE__);
  dispatch<Epilogue::kRope>(nullptr, x, w_qkv, num_tokens, n, k, o, stream);
}

}  // namespace pagoda::kernels
