// Quantized decode GEMMs (quant_gemv.h) on the tensor cores, and the dequantization for large T.
//
// A warp owns one tile of 16 rows and walks it along K (a slice of K when the GPU is short of warps, as in
// gemv.cu). Loads run one iteration ahead: while a warp multiplies 4 chunks of 64 columns (2 for 8-bit codes),
// the next iteration's code vectors are in flight into registers (16-byte loads that skip L1) and its groups'
// params into a double-buffered shared array (cp.async); the first iteration's are issued before the PDL
// wait. Each k-step of 16 columns then:
//  - turns the lane's 8 codes into bf16 MMA registers: 4-bit codes by OR-ing them into the mantissa of 128.0
//    and subtracting 128 + z (exact: small integers), 8-bit codes through 2^23 + u in fp32, FP8 by moving its
//    exponent and mantissa into an fp32 and scaling by 2^120 (exact, subnormals included);
//  - multiplies them by the lane's activations (tokens 8tt + p, columns 4t .. 4t + 3: one 8-byte load through
//    L1 a chunk ahead, as the layout permutes the MMA's columns) with mma.sync m16n8k16, into two chains of
//    fp32 sums (even and odd k-steps) so that consecutive MMAs do not wait for each other.
// A chunk inside one group converts its four k-steps before the four MMAs and checks the group's end once.
// At the end of each group the sums are scaled into the accumulators in fp32: acc += s * sum((q - z) x) in
// the zeros form, acc += s * sum(q x) - m * sum(x) in the offsets form (the sum of the activations over the
// group comes from the same fragments, summed over each quad and shuffled to the lanes of the output
// fragment). Tried and not kept: 4-bit codes as 128 + q with (128 + z) s * sum(x) subtracted per group, the
// sum from an MMA of ones (4 fewer instructions a k-step): no faster (docs/PERFORMANCE.md). Tokens past T are
// zero activations; padding rows are zero params and never stored. One launch takes up to 16 tokens (one or
// two token tiles of 8); 17 to 40 run as passes of 16 (run_passes).
// Measured on the H200 (QuantGemv.PrintsBandwidthOnLlamaShapes): 1.3 to 2.1 TB/s for 4-bit codes at one
// token, 1.9 to 2.9 for 8-bit, where the bf16 skinny GEMM streams 3.4 to 4.1: bound by latency and the
// instructions per byte (dequantization, and an MMA of 8 tokens for one), not yet by HBM.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/gemm_epilogue.cuh"
#include "pagoda/kernels/launch.cuh"
#include "pagoda/kernels/quant_codes.cuh"
#include "pagoda/kernels/quant_gemv.h"

namespace pagoda::kernels {
namespace {

constexpr int kWarps = 8;  // per block: K may be cut in up to 8 slices
constexpr int kThreads = kWarps * 32;
constexpr int kLoadsPerLane = 8;        // 16-byte code loads in flight per lane (two iterations of 4)
constexpr int kBlocksPerSm = 2;         // __launch_bounds__ below
constexpr int kMinChunksPerSlice = 4;   // a K slice is at least this many chunks (256 columns)

// The sum of a lane's four activations (two bf16x2 words).
__device__ __forceinline__ float sum4(uint2 b) {
  return (__uint_as_float(b.x << 16) + __uint_as_float(b.x & 0xffff0000u)) +
         (__uint_as_float(b.y << 16) + __uint_as_float(b.y & 0xffff0000u));
}

// out [T, N] (or the epilogue's outputs) from x [T, K] and the tiles; TT token tiles of 8. Block = kWarps
// warps = kWarps / splits tiles, each tile's chunks cut into `splits` slices (one warp per slice).
template <TileCodes C, int TT, bool kOffsets, Epilogue E>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    quant_gemv_kernel(bf16* __restrict__ out, const bf16* __restrict__ x, const Tiles w, int num_tokens, int splits,
                      const QkvRopeOutput rope) {
  using Cd = Codes<C>;
  constexpr int V = Cd::kVectors;
  constexpr int U = kLoadsPerLane / (2 * V);  // chunks per iteration; the next iteration's are in flight too
  constexpr int kSteps = 4 * U;               // k-steps per iteration: at most this many groups
  __shared__ __align__(16) float2 group_params[kWarps][2][kSteps][kTileRows];  // double-buffered
  __shared__ float partial[kWarps][TT * 4][32];

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int p = lane / 4, t = lane % 4;  // fragment row and column group
  const int slice = warp % splits;
  const int tile_index = blockIdx.x * (kWarps / splits) + warp / splits;
  const int tile = min(tile_index, w.tiles - 1);  // past the last tile: recompute it, store nothing
  const int c_begin = static_cast<int>(static_cast<int64_t>(w.chunks) * slice / splits);
  const int c_end = static_cast<int>(static_cast<int64_t>(w.chunks) * (slice + 1) / splits);
  const int ksteps = w.k / kTileStepCols;
  const int step_begin = 4 * c_begin, step_end = min(4 * c_end, ksteps);
  const int spg = w.steps_per_group;
  const uint4* codes = w.codes + static_cast<int64_t>(tile) * w.chunks * V * 32 + lane;
  const float2* params = w.params + static_cast<int64_t>(tile) * w.groups * kTileRows;
  const bf16* xt[TT];  // the lane's token row of each token tile, or null past T
#pragma unroll
  for (int tt = 0; tt < TT; ++tt) {
    const int token = 8 * tt + p;
    xt[tt] = token < num_tokens ? x + static_cast<int64_t>(token) * w.k + 4 * t : nullptr;
  }

  // Two chains of group sums (even and odd k-steps), so that consecutive MMAs do not wait for each other.
  float acc[TT][4], part[2][TT][4], xsum[TT];
#pragma unroll
  for (int tt = 0; tt < TT; ++tt) {
    xsum[tt] = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[tt][i] = part[0][tt][i] = part[1][tt][i] = 0.0f;
  }
  typename Cd::Zero zero = Cd::zero(0.0f, 0.0f);
  // The current group: its index, and the k-step after its last (no division per k-step).
  int group = step_begin / spg;
  int group_end = min((group + 1) * spg, step_end);

  // Issues the loads of iteration c: its code vectors into `wv`, the params of its groups into buffer `buf`.
  // The group of the iteration's first k-step is tracked (issue_group, ending before k-step issue_end), so
  // that no k-step needs a division.
  int issue_group = group, issue_end = (group + 1) * spg;
  auto issue = [&](uint4 (&wv)[U][V], int c, int buf) {
    const uint4* vectors = codes + static_cast<int64_t>(c) * V * 32;
    if (c + U <= c_end) {  // warp-uniform: a whole iteration
#pragma unroll
      for (int i = 0; i < U * V; ++i) wv[i / V][i % V] = load_codes(vectors + i * 32);
    } else {
#pragma unroll
      for (int i = 0; i < U * V; ++i) wv[i / V][i % V] = c + i / V < c_end ? load_codes(vectors + i * 32) : make_uint4(0, 0, 0, 0);
    }
    if (c < c_end) {
      while (issue_end <= 4 * c) {
        ++issue_group;
        issue_end += spg;
      }
      const int last = min(4 * (c + U), step_end) - 1;
      int count = 1;  // groups from issue_group to the one of k-step `last`
      for (int b = issue_end; b <= last; b += spg) ++count;
      const float4* src = reinterpret_cast<const float4*>(params + issue_group * kTileRows);
      float4* dst = reinterpret_cast<float4*>(&group_params[warp][buf][0][0]);
      for (int i = lane; i < count * kTileRows / 2; i += 32) copy_async16(dst + i, src + i);
    }
    copy_async_commit();
  };

  // The first iteration's codes and params are loaded before the PDL wait: no kernel writes weights, so the
  // loads overlap the end of the kernel before (launch.cuh). Activations and outputs only after it.
  uint4 next[U][V];
  issue(next, c_begin, 0);
  pdl_grid_sync();
  // The activations of chunk `chunk` (its k-steps before step_end) into xn, zeros elsewhere: loaded one chunk
  // ahead of their use, so the L1 / L2 latency hides behind the chunk before.
  uint2 xn[4][TT];
  auto load_x = [&](int chunk) {
#pragma unroll
    for (int tt = 0; tt < TT; ++tt) {
      const bf16* xc = xt[tt] + 4 * chunk * kTileStepCols;
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        xn[s][tt] = make_uint2(0, 0);
        if (xt[tt] && 4 * chunk + s < step_end) xn[s][tt] = __ldg(reinterpret_cast<const uint2*>(xc + s * kTileStepCols));
      }
    }
  };
  load_x(c_begin);
  for (int c = c_begin, buf = 0; c < c_end; c += U, buf ^= 1) {  // warp-uniform
    uint4 wv[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int v = 0; v < V; ++v) wv[u][v] = next[u][v];
    }
    __syncwarp();  // every lane is done reading the buffer the next issue overwrites (iteration c - U's)
    issue(next, c + U, buf ^ 1);
    copy_async_wait_one();  // this iteration's params have landed
    __syncwarp();
    const int last_step = min(4 * (c + U), step_end) - 1;
    const int g_first = group;
    float2 (&gp)[kSteps][kTileRows] = group_params[warp][buf];
    if constexpr (!kOffsets) zero = Cd::zero(gp[0][p].y, gp[0][p + 8].y);

#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (4 * (c + u) > last_step) break;  // warp-uniform
      const bool whole = 4 * (c + u) + 3 <= last_step;  // warp-uniform
      uint2 xb[4][TT];  // this chunk's activations (loaded a chunk ahead); then the next chunk's into xn
#pragma unroll
      for (int s = 0; s < 4; ++s) {
#pragma unroll
        for (int tt = 0; tt < TT; ++tt) xb[s][tt] = xn[s][tt];
      }
      load_x(c + u + 1);
      // Scales the group's sums into the accumulators and moves to the next group (`gi`: its params).
      auto end_group = [&](int gi, bool more) {
        const float2 lo = gp[gi][p], hi = gp[gi][p + 8];
#pragma unroll
        for (int tt = 0; tt < TT; ++tt) {
          float sum[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            sum[i] = part[0][tt][i] + part[1][tt][i];
            part[0][tt][i] = part[1][tt][i] = 0.0f;
          }
          acc[tt][0] += lo.x * sum[0];
          acc[tt][1] += lo.x * sum[1];
          acc[tt][2] += hi.x * sum[2];
          acc[tt][3] += hi.x * sum[3];
          if constexpr (kOffsets) {  // - m * (sum of x over the group) of tokens 2t and 2t + 1
            float q = xsum[tt] + __shfl_xor_sync(0xffffffffu, xsum[tt], 1);
            q += __shfl_xor_sync(0xffffffffu, q, 2);  // lanes of quad p: token 8tt + p
            const float x0 = __shfl_sync(0xffffffffu, q, 8 * t), x1 = __shfl_sync(0xffffffffu, q, 8 * t + 4);
            acc[tt][0] -= lo.y * x0;
            acc[tt][1] -= lo.y * x1;
            acc[tt][2] -= hi.y * x0;
            acc[tt][3] -= hi.y * x1;
            xsum[tt] = 0.0f;
          }
        }
        ++group;
        group_end = min(group_end + spg, step_end);
        if constexpr (!kOffsets) {
          if (more) zero = Cd::zero(gp[gi + 1][p].y, gp[gi + 1][p + 8].y);
        }
      };
      auto multiply = [&](const uint32_t (&a)[4], int s) {
#pragma unroll
        for (int tt = 0; tt < TT; ++tt) {
          mma_bf16(part[s % 2][tt], a, xb[s][tt].x, xb[s][tt].y);
          if constexpr (kOffsets) xsum[tt] += sum4(xb[s][tt]);
        }
      };
      const int chunk_step = 4 * (c + u);
      if (whole && chunk_step + 4 <= group_end) {  // warp-uniform: four k-steps of one group
        uint32_t a[4][4];
#pragma unroll
        for (int s = 0; s < 4; ++s) Cd::fragment(a[s], wv[u], s, zero);
#pragma unroll
        for (int s = 0; s < 4; ++s) multiply(a[s], s);
        if (chunk_step + 4 == group_end) end_group(group - g_first, chunk_step + 3 < last_step);
      } else {  // a group ends inside the chunk, or the chunk is the slice's partial last
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          const int step = chunk_step + s;
          if (step > last_step) break;  // warp-uniform
          uint32_t a[4];
          Cd::fragment(a, wv[u], s, zero);
          multiply(a, s);
          if (step + 1 == group_end) end_group(group - g_first, step < last_step);
        }
      }
    }
  }

  if (splits > 1) {  // uniform over the block
#pragma unroll
    for (int tt = 0; tt < TT; ++tt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) partial[warp][tt * 4 + i][lane] = acc[tt][i];
    }
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int tt = 0; tt < TT; ++tt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float sum = 0.0f;
        for (int sl = 0; sl < splits; ++sl) sum += partial[warp + sl][tt * 4 + i][lane];
        acc[tt][i] = sum;
      }
    }
  }
  if (tile_index >= w.tiles) return;

  // Lane (p, t) holds rows 2p and 2p + 1 of the tile (positions p, p + 8) for tokens 2t and 2t + 1.
  const int row = tile * kTileRows + 2 * p;
#pragma unroll
  for (int tt = 0; tt < TT; ++tt) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int token = 8 * tt + 2 * t + j;
      if (token >= num_tokens) continue;
      if constexpr (E == Epilogue::kPlain) {
        store_rows<E>(out, rope, w.n, token, row, acc[tt][j], 0.0f);
        store_rows<E>(out, rope, w.n, token, row + 1, acc[tt][2 + j], 0.0f);
      } else {
        store_rows<E>(out, rope, w.n, token, row, acc[tt][j], acc[tt][2 + j]);
      }
    }
  }
}


template <TileCodes C, int TT, bool kOffsets, Epilogue E>
void launch(bf16* out, const bf16* x, const QuantMatrix& m, int num_tokens, const QkvRopeOutput& rope,
            cudaStream_t stream) {
  const Tiles w = tiles_of(m);
  const int splits = one_wave_splits(w.tiles, w.chunks, kWarps, kBlocksPerSm, kMinChunksPerSlice);
  const int64_t tiles_per_block = kWarps / splits;
  const int64_t blocks = (w.tiles + tiles_per_block - 1) / tiles_per_block;
  constexpr const char* name = E == Epilogue::kPlain  ? "quant_gemv"
                               : E == Epilogue::kSilu ? "quant_gemv_silu"
                                                      : "quant_gemv_qkv_rope";
  launch_kernel(name, quant_gemv_kernel<C, TT, kOffsets, E>, static_cast<unsigned>(blocks), kThreads, 0, stream, out, x, w,
                num_tokens, splits, rope);
}

template <TileCodes C, Epilogue E>
void dispatch_codes(bf16* out, const bf16* x, const QuantMatrix& m, int num_tokens, const QkvRopeOutput& rope,
                    cudaStream_t stream) {
  const bool two = num_tokens > 8;
  if constexpr (C != TileCodes::kE4M3) {
    if (m.shape.offsets)
      return two ? launch<C, 2, true, E>(out, x, m, num_tokens, rope, stream)
                 : launch<C, 1, true, E>(out, x, m, num_tokens, rope, stream);
  }
  return two ? launch<C, 2, false, E>(out, x, m, num_tokens, rope, stream)
             : launch<C, 1, false, E>(out, x, m, num_tokens, rope, stream);
}

template <Epilogue E>
void dispatch(bf16* out, const bf16* x, const QuantMatrix& m, int num_tokens, const QkvRopeOutput& rope,
              cudaStream_t stream) {
  switch (m.shape.codes) {
    case TileCodes::kU4: return dispatch_codes<TileCodes::kU4, E>(out, x, m, num_tokens, rope, stream);
    case TileCodes::kI8: return dispatch_codes<TileCodes::kI8, E>(out, x, m, num_tokens, rope, stream);
    case TileCodes::kE4M3: return dispatch_codes<TileCodes::kE4M3, E>(out, x, m, num_tokens, rope, stream);
  }
}

void check_supported(const bf16* x, const QuantMatrix& m, int num_tokens, const char* what) {
  if (!quant_gemv_supported(x, m, num_tokens))
    throw_cuda_error(cudaErrorInvalidValue, what, __FILE__, __LINE__);
}

// One thread per 16-byte code vector: its 32 (4-bit) or 16 (8-bit) values to out [N, K].
template <TileCodes C>
__global__ void dequantize_tiles_kernel(bf16* __restrict__ out, const Tiles w) {
  pdl_grid_sync();
  constexpr int V = Codes<C>::kVectors;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t vectors = static_cast<int64_t>(w.tiles) * w.chunks * V * 32;
  if (index >= vectors) return;
  const int lane = static_cast<int>(index % 32);
  const int v = static_cast<int>((index / 32) % V);
  const int64_t chunk = (index / (32 * V)) % w.chunks, tile = index / (32 * V * w.chunks);
  const int p = lane / 4, t = lane % 4;
  const uint4 vec = w.codes[index];
  const int group_cols = w.steps_per_group * kTileStepCols;
  // The vector's k-steps: all 4 of the chunk (4-bit) or steps 2v, 2v + 1 (8-bit).
  for (int s = V == 1 ? 0 : 2 * v; s < (V == 1 ? 4 : 2 * v + 2); ++s) {
    const int64_t col0 = (chunk * 4 + s) * kTileStepCols + 4 * t;
    if (col0 >= w.k) break;
    const float2* param = w.params + (tile * w.groups + col0 / group_cols) * kTileRows;
    for (int upper = 0; upper < 2; ++upper) {
      const int64_t row = tile * kTileRows + 2 * p + upper;  // position p + 8 * upper
      if (row >= w.n) continue;
      const float2 sz = param[p + 8 * upper];
      float value[4];
      for (int i = 0; i < 4; ++i) {
        float q;
        if constexpr (C == TileCodes::kU4) {
          const int bit = (i % 2) * 16 + 4 * ((i / 2) * 2 + upper);
          q = static_cast<float>((word_of(vec, s) >> bit) & 0xfu);
        } else {
          const uint32_t word = word_of(vec, (s % 2) * 2 + upper);
          q = C == TileCodes::kI8 ? static_cast<float>(static_cast<int8_t>((word >> (8 * i)) & 0xffu))
                                  : e4m3_byte(word, i);
        }
        // As quant_tile_value: no contraction into an FMA, so values equal the CPU reference's.
        value[i] = C == TileCodes::kE4M3 ? __fmul_rn(q, sz.x)
                   : w.offsets           ? __fsub_rn(__fmul_rn(q, sz.x), sz.y)
                                         : __fmul_rn(__fsub_rn(q, sz.y), sz.x);
      }
      const uint2 packed = make_uint2(pack_bf16x2(value[0], value[1]), pack_bf16x2(value[2], value[3]));
      *reinterpret_cast<uint2*>(out + row * w.k + col0) = packed;
    }
  }
}

}  // namespace

// Runs the kernel in passes of at most kPassTokens tokens (one launch each, reading the weights again): out rows,
// x rows and the RoPE arrays move with the pass.
template <Epilogue E>
void run_passes(bf16* out, int64_t out_row, const bf16* x, const QuantMatrix& w, int num_tokens, QkvRopeOutput rope,
                cudaStream_t stream) {
  constexpr int kPassTokens = 16;
  for (int t0 = 0; t0 < num_tokens; t0 += kPassTokens) {
    const int n = std::min(kPassTokens, num_tokens - t0);
    QkvRopeOutput o = rope;
    if constexpr (E == Epilogue::kRope) {
      o.q_out += static_cast<int64_t>(t0) * o.num_heads * o.head_dim;
      o.positions += t0;
      o.slot_mapping += t0;
    }
    dispatch<E>(out ? out + t0 * out_row : nullptr, x + static_cast<int64_t>(t0) * w.shape.k, w, n, o, stream);
  }
}

bool quant_gemv_supported(const void* x, const QuantMatrix& w, int num_tokens) {
  const QuantTilesShape& s = w.shape;
  return num_tokens >= 1 && num_tokens <= kQuantGemvMaxTokens && s.n > 0 && s.k > 0 && s.k % kTileStepCols == 0 &&
         (s.group_size >= s.k || s.group_size % kTileStepCols == 0) && reinterpret_cast<uintptr_t>(x) % 8 == 0 &&
         w.codes && w.params && s.tiles() < (int64_t{1} << 31);
}

void quant_gemv(bf16* out, const bf16* x, const QuantMatrix& w, int num_tokens, cudaStream_t stream) {
  if (num_tokens <= 0) return;
  check_supported(x, w, num_tokens, "quant_gemv: shape or alignment not supported");
  run_passes<Epilogue::kPlain>(out, w.shape.n, x, w, num_tokens, QkvRopeOutput{}, stream);
}

void quant_gemv_silu(bf16* out, const bf16* x, const QuantMatrix& w_gate_up, int num_tokens, cudaStream_t stream) {
  if (num_tokens <= 0) return;
  check_supported(x, w_gate_up, num_tokens, "quant_gemv_silu: shape or alignment not supported");
  if (w_gate_up.shape.n % 2 != 0)
    throw_cuda_error(cudaErrorInvalidValue, "quant_gemv_silu: odd gate-up rows", __FILE__, __LINE__);
  run_passes<Epilogue::kSilu>(out, w_gate_up.shape.n / 2, x, w_gate_up, num_tokens, QkvRopeOutput{}, stream);
}

void quant_gemv_qkv_rope(const QkvRopeOutput& o, const bf16* x, const QuantMatrix& w_qkv, int num_tokens,
                         cudaStream_t stream) {
  if (num_tokens <= 0) return;
  check_supported(x, w_qkv, num_tokens, "quant_gemv_qkv_rope: shape or alignment not supported");
  if (w_qkv.shape.n != static_cast<int64_t>(o.num_heads + 2 * o.num_kv_heads) * o.head_dim || o.head_dim % 2 != 0)
    throw_cuda_error(cudaErrorInvalidValue, "quant_gemv_qkv_rope: rows do not match the heads", __FILE__, __LINE__);
  run_passes<Epilogue::kRope>(nullptr, 0, x, w_qkv, num_tokens, o, stream);
}

void dequantize_tiles_bf16(bf16* out, const QuantMatrix& m, cudaStream_t stream) {
  const Tiles w = tiles_of(m);
  const int64_t vectors = static_cast<int64_t>(w.tiles) * w.chunks * tile_vectors_per_chunk(m.shape.codes) * 32;
  if (vectors == 0) return;
  const unsigned blocks = static_cast<unsigned>((vectors + 255) / 256);
  switch (m.shape.codes) {
    case TileCodes::kU4: return launch_kernel("dequantize_tiles", dequantize_tiles_kernel<TileCodes::kU4>, blocks, 256, 0, stream, out, w);
    case TileCodes::kI8: return launch_kernel("dequantize_tiles", dequantize_tiles_kernel<TileCodes::kI8>, blocks, 256, 0, stream, out, w);
    case TileCodes::kE4M3:
      return launch_kernel("dequantize_tiles", dequantize_tiles_kernel<TileCodes::kE4M3>, blocks, 256, 0, stream, out, w);
  }
}

}  // namespace pagoda::kernels
