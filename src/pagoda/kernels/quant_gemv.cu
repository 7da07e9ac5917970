// Quantized decode GEMMs (quant_gemv.h) on the tensor cores, and the dequantization for large T.
//
// A warp owns one tile of 16 rows and walks it along K (a slice of K when the GPU is short of warps, as in
// gemv.cu), a stage of 4 chunks of 64 columns (2 for 8-bit codes) at a time. Its weights come through a ring of
// kStages stages in shared memory, kStages - 1 in flight while one is multiplied: each lane copies its own 16-byte
// code vectors (cp.async, skipping L1) and the lanes together the stage's groups' params; the first stages are
// issued before the PDL wait. At one token the stage's columns of x come through the same ring (kStageX), so no
// k-step waits on an L2 read of x; at more tokens x is read through L1 one chunk ahead (staging 2 to 8 rows of x
// halves the blocks an SM holds: slower, docs/PERFORMANCE.md). Each k-step of 16 columns then:
//  - turns the lane's 8 codes into bf16 MMA registers: 4-bit codes by OR-ing them into the mantissa of 128.0
//    and subtracting 128 + z (exact: small integers), 8-bit codes through 2^23 + u in fp32, FP8 by moving its
//    exponent and mantissa into an fp32 and scaling by 2^120 (exact, subnormals included);
//  - multiplies them by the lane's activations (tokens 8tt + p, columns 4t .. 4t + 3, as the layout permutes
//    the MMA's columns) with mma.sync m16n8k16, into two chains of fp32 sums (even and odd k-steps) so that
//    consecutive MMAs do not wait for each other.
// A chunk inside one group converts its four k-steps before the four MMAs and checks the group's end once.
// At the end of each group the sums are scaled into the accumulators in fp32: acc += s * sum((q - z) x) in
// the zeros form, acc += s * sum(q x) - m * sum(x) in the offsets form (the sum of the activations over the
// group comes from the same fragments, summed over each quad and shuffled to the lanes of the output
// fragment). Tried and not kept here: 4-bit codes as 128 + q with (128 + z) s * sum(x) subtracted per group, the
// sum from an MMA of ones (4 fewer instructions a k-step): no faster (docs/PERFORMANCE.md); quant_gemv_few_tokens.cu
// does it with the sums of x taken once per block from shared memory, and there it pays. Steps of 1 to 8 tokens
// of 4- and 8-bit codes go to that kernel where it takes the shape (run_passes). Tokens past T are
// zero activations; padding rows are zero params and never stored. One launch takes up to 16 tokens (one or
// two token tiles of 8); 17 to 40 run as passes of 16 (run_passes).
// Measured on the H200 (QuantGemv.PrintsBandwidthOnLlamaShapes): 1.5 to 2.3 TB/s for 4-bit codes at one
// token, 2.1 to 2.9 for 8-bit, where the bf16 skinny GEMM streams 3.4 to 4.1: bound by the latency of each warp's
// chain of instructions (2.9 warps a scheduler, one issue every 6 cycles), not yet by HBM.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/gemm_epilogue.cuh"
#include "pagoda/kernels/launch.cuh"
#include "pagoda/kernels/quant_codes.cuh"
#include "pagoda/kernels/quant_gemv.h"
#include "pagoda/kernels/quant_gemv_few_tokens.h"

namespace pagoda::kernels {
namespace {

constexpr int kWarps = 8;  // per block: K may be cut in up to 8 slices
constexpr int kThreads = kWarps * 32;
constexpr int kVectorsPerStage = 4;     // 16-byte code vectors a lane copies per stage: 4 chunks of 4-bit codes, 2 of 8-bit
constexpr int kBlocksPerSm = 2;         // __launch_bounds__ below (3, at 80 registers: slower, docs/PERFORMANCE.md)
// The ring: stages - 1 in flight while one is multiplied. With x read through L1 (more than one token), 3 stages
// leave L1 the room to hold x.
__host__ __device__ constexpr int ring_stages(bool stage_x) { return stage_x ? 4 : 3; }
constexpr int kMinChunksPerSlice = 4;   // a K slice is at least this many chunks (256 columns)
constexpr int kStageXPad = 32;          // bytes after each token's row of a stage's x (more than one): conflict-free reads

// K-steps of one stage.
__host__ __device__ constexpr int stage_steps(TileCodes c) { return 4 * kVectorsPerStage / tile_vectors_per_chunk(c); }

// Params groups one stage's k-steps can touch (a stage starts on a chunk, a group on a multiple of `spg` k-steps).
inline int stage_param_slots(TileCodes c, int spg) { return std::min(stage_steps(c), (stage_steps(c) + spg - 1) / spg + 1); }

// The dynamic shared ring of a block: per warp, ring_stages stages of code vectors, params and (kStageX) x rows.
struct RingLayout {
  int param_slots, x_tokens, x_row_bytes;
  __host__ __device__ int codes_bytes() const { return kVectorsPerStage * 32 * 16; }
  __host__ __device__ int params_bytes() const { return param_slots * kTileRows * 8; }
  __host__ __device__ int x_bytes() const { return x_tokens * x_row_bytes; }
  __host__ __device__ int stage_bytes() const { return codes_bytes() + params_bytes() + x_bytes(); }
  __host__ __device__ size_t block_bytes() const {
    return static_cast<size_t>(kWarps) * ring_stages(x_tokens > 0) * stage_bytes();
  }
};

inline RingLayout ring_layout(TileCodes c, int spg, int x_tokens) {
  return RingLayout{stage_param_slots(c, spg), x_tokens, stage_steps(c) * kTileStepCols * 2 + (x_tokens > 1 ? kStageXPad : 0)};
}

// out [T, N] (or the epilogue's outputs) from x [T, K] and the tiles; TT token tiles of 8. Block = kWarps
// warps = kWarps / splits tiles, each tile's chunks cut into `splits` slices (one warp per slice). Dynamic shared
// memory: ring.block_bytes(). kStageX (one token tile): each stage's columns of x come through the ring too (its
// x_tokens = T rows); otherwise x is read through L1 one chunk ahead.
template <TileCodes C, int TT, bool kOffsets, bool kStageX, Epilogue E>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    quant_gemv_kernel(bf16* __restrict__ out, const bf16* __restrict__ x, const Tiles w, int num_tokens, int splits,
                      const RingLayout ring, const QkvRopeOutput rope) {
  static_assert(!kStageX || TT == 1, "x is staged for one token tile");
  using Cd = Codes<C>;
  constexpr int V = Cd::kVectors;
  constexpr int U = kVectorsPerStage / V;  // chunks per stage
  constexpr int kStages = ring_stages(kStageX);
  extern __shared__ __align__(16) unsigned char ring_memory[];

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
  // This warp's stages: [kVectorsPerStage][32 lanes] code vectors, [param_slots][16 positions] params, then
  // [x_tokens][x_row_bytes] the stage's columns of x.
  unsigned char* warp_ring = ring_memory + static_cast<size_t>(warp) * kStages * ring.stage_bytes();
  auto stage_codes = [&](int slot) { return reinterpret_cast<uint4*>(warp_ring + slot * ring.stage_bytes()); };
  auto stage_params = [&](int slot) {
    return reinterpret_cast<float2*>(warp_ring + slot * ring.stage_bytes() + ring.codes_bytes());
  };
  auto stage_x = [&](int slot) {
    return warp_ring + slot * ring.stage_bytes() + ring.codes_bytes() + ring.params_bytes();
  };
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

  // Copies the weights of stage c (U chunks from chunk c) into ring slot `slot`: its code vectors, each lane its
  // own, and the params of its groups. The group of the stage's first k-step is tracked (issue_group, ending
  // before k-step issue_end), so that no k-step needs a division.
  int issue_group = group, issue_end = (group + 1) * spg;
  auto issue_weights = [&](int c, int slot) {
    if (c >= c_end) return;  // warp-uniform
    const uint4* vectors = codes + static_cast<int64_t>(c) * V * 32;
    uint4* dst = stage_codes(slot) + lane;
    const int count_vectors = min(U, c_end - c) * V;
#pragma unroll
    for (int i = 0; i < kVectorsPerStage; ++i) {
      if (i < count_vectors) copy_weights_async16(dst + i * 32, vectors + i * 32);
    }
    while (issue_end <= 4 * c) {
      ++issue_group;
      issue_end += spg;
    }
    const int last = min(4 * (c + U), step_end) - 1;
    int count = 1;  // groups from issue_group to the one of k-step `last`
    for (int b = issue_end; b <= last; b += spg) ++count;
    const float4* src = reinterpret_cast<const float4*>(params + issue_group * kTileRows);
    float4* pdst = reinterpret_cast<float4*>(stage_params(slot));
    for (int i = lane; i < count * kTileRows / 2; i += 32) copy_weights_async16(pdst + i, src + i);
  };
  // kStageX: stage c's columns of x, 8 a lane, for each of the T tokens.
  auto issue_x = [&](int c, int slot) {
    if (c >= c_end) return;
    const int col = 64 * c + 8 * lane;
    if (lane >= 8 * U || col >= kTileStepCols * step_end) return;
    unsigned char* dst = stage_x(slot) + 16 * lane;
    for (int token = 0; token < ring.x_tokens; ++token)
      copy_async16(dst + token * ring.x_row_bytes, x + static_cast<int64_t>(token) * w.k + col);
  };

  // The first kStages - 1 stages' weights are copied before the PDL wait: no kernel writes weights, so the
  // copies overlap the end of the kernel before (launch.cuh). Activations and outputs only after it. One
  // cp.async group a stage (empty past the slice): the first group also holds the x of the first stages.
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) {
    issue_weights(c_begin + j * U, j);
    if (j < kStages - 2) copy_async_commit();
  }
  pdl_grid_sync();
  if constexpr (kStageX) {
#pragma unroll
    for (int j = 0; j < kStages - 1; ++j) issue_x(c_begin + j * U, j);
  }
  copy_async_commit();
  if constexpr (kStageX) copy_async_wait<0>();  // the first stages' x (the weights are long there)
  // !kStageX: the activations of chunk `chunk` (its k-steps before step_end) into xn, zeros elsewhere: loaded one
  // chunk ahead of their use, so the L1 / L2 latency hides behind the chunk before.
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
  if constexpr (!kStageX) load_x(c_begin);
  for (int c = c_begin, slot = 0; c < c_end; c += U, slot = slot + 1 == kStages ? 0 : slot + 1) {  // warp-uniform
    copy_async_wait<kStages - 2>();  // this stage's copies have landed (this lane's)
    __syncwarp();                     // ... and every lane's; every lane is done with the stage before
    const int next_slot = slot == 0 ? kStages - 1 : slot - 1;
    issue_weights(c + (kStages - 1) * U, next_slot);
    if constexpr (kStageX) issue_x(c + (kStages - 1) * U, next_slot);
    copy_async_commit();
    uint4 wv[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int v = 0; v < V; ++v) wv[u][v] = stage_codes(slot)[(u * V + v) * 32 + lane];
    }
    const unsigned char* sx = stage_x(slot) + p * ring.x_row_bytes + 8 * t;  // kStageX: token p, columns 4t ..
    const int last_step = min(4 * (c + U), step_end) - 1;
    const int g_first = group;
    const float2* gp = stage_params(slot);  // [param_slots][16]: gp[gi * 16 + position]
    if constexpr (!kOffsets) zero = Cd::zero(gp[p].y, gp[p + 8].y);

#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (4 * (c + u) > last_step) break;  // warp-uniform
      const bool whole = 4 * (c + u) + 3 <= last_step;  // warp-uniform
      uint2 xb[4][TT];  // this chunk's activations
      if constexpr (kStageX) {
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          xb[s][0] = make_uint2(0, 0);
          if (p < num_tokens && 4 * (c + u) + s <= last_step)
            xb[s][0] = *reinterpret_cast<const uint2*>(sx + (16 * (4 * u + s)) * 2);
        }
      } else {  // loaded a chunk ahead; then the next chunk's into xn
#pragma unroll
        for (int s = 0; s < 4; ++s) {
#pragma unroll
          for (int tt = 0; tt < TT; ++tt) xb[s][tt] = xn[s][tt];
        }
        load_x(c + u + 1);
      }
      // Scales the group's sums into the accumulators and moves to the next group (`gi`: its params).
      auto end_group = [&](int gi, bool more) {
        const float2 lo = gp[gi * kTileRows + p], hi = gp[gi * kTileRows + p + 8];
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
          if (more) zero = Cd::zero(gp[(gi + 1) * kTileRows + p].y, gp[(gi + 1) * kTileRows + p + 8].y);
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
    // Each warp's sums [TT * 4][32] go to the start of its own ring (its copies have all landed, and every lane
    // is done reading it).
    copy_async_wait<0>();
    __syncwarp();
    auto warp_partial = [&](int wp) {
      return reinterpret_cast<float*>(ring_memory + static_cast<size_t>(wp) * kStages * ring.stage_bytes());
    };
#pragma unroll
    for (int tt = 0; tt < TT; ++tt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) warp_partial(warp)[(tt * 4 + i) * 32 + lane] = acc[tt][i];
    }
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int tt = 0; tt < TT; ++tt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float sum = 0.0f;
        for (int sl = 0; sl < splits; ++sl) sum += warp_partial(warp + sl)[(tt * 4 + i) * 32 + lane];
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


template <TileCodes C, int TT, bool kOffsets, bool kStageX, Epilogue E>
void launch(bf16* out, const bf16* x, const QuantMatrix& m, int num_tokens, const QkvRopeOutput& rope,
            cudaStream_t stream) {
  const Tiles w = tiles_of(m);
  const int splits = one_wave_splits(w.tiles, w.chunks, kWarps, kBlocksPerSm, kMinChunksPerSlice);
  const int64_t tiles_per_block = kWarps / splits;
  const int64_t blocks = (w.tiles + tiles_per_block - 1) / tiles_per_block;
  const RingLayout ring = ring_layout(C, w.steps_per_group, kStageX ? num_tokens : 0);
  constexpr const char* name = E == Epilogue::kPlain  ? "quant_gemv"
                               : E == Epilogue::kSilu ? "quant_gemv_silu"
                                                      : "quant_gemv_qkv_rope";
  // The ring is above the default 48 KiB of dynamic shared memory: allow all the SM gives a block, once per kernel
  // (and with x in the ring, prefer shared memory over L1 so that two blocks fit).
  static const size_t max_ring_bytes = [] {
    auto* kernel = quant_gemv_kernel<C, TT, kOffsets, kStageX, E>;
    int device = 0, optin = 0;
    cudaFuncAttributes attributes{};
    cuda_check(cudaGetDevice(&device), name, __FILE__, __LINE__);
    cuda_check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), name, __FILE__, __LINE__);
    cuda_check(cudaFuncGetAttributes(&attributes, kernel), name, __FILE__, __LINE__);
    const int most = optin - static_cast<int>(attributes.sharedSizeBytes);
    cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most), name, __FILE__, __LINE__);
    if (kStageX)  // x is in the ring: L1 serves nothing
      cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared),
                 name, __FILE__, __LINE__);
    return static_cast<size_t>(most);
  }();
  if constexpr (kStageX) {  // x too large for the ring beside the weights: through L1
    if (ring.block_bytes() > max_ring_bytes) return launch<C, TT, kOffsets, false, E>(out, x, m, num_tokens, rope, stream);
  }
  if (ring.block_bytes() > max_ring_bytes)
    throw_cuda_error(cudaErrorInvalidValue, "quant_gemv: the ring does not fit in shared memory", __FILE__, __LINE__);
  launch_kernel(name, quant_gemv_kernel<C, TT, kOffsets, kStageX, E>, static_cast<unsigned>(blocks), kThreads,
                ring.block_bytes(), stream, out, x, w, num_tokens, splits, ring, rope);
}

// Up to this many tokens x comes through the ring (kStageX): one. PAGODA_QUANT_STAGE_X=N (0 to 8) overrides, for A/B runs.
int stage_x_tokens() {
  static const int tokens = env_int("PAGODA_QUANT_STAGE_X", 1);
  return tokens;
}

template <TileCodes C, Epilogue E>
void dispatch_codes(bf16* out, const bf16* x, const QuantMatrix& m, int num_tokens, const QkvRopeOutput& rope,
                    cudaStream_t stream) {
  const bool two = num_tokens > 8;
  // cp.async moves 16 bytes: x's rows must start on 16 (K, a multiple of 16, keeps them there).
  const bool stage_x = !two && num_tokens <= stage_x_tokens() && reinterpret_cast<uintptr_t>(x) % 16 == 0;
  if constexpr (C != TileCodes::kE4M3) {
    if (m.shape.offsets) {
      if (stage_x) return launch<C, 1, true, true, E>(out, x, m, num_tokens, rope, stream);
      return two ? launch<C, 2, true, false, E>(out, x, m, num_tokens, rope, stream)
                 : launch<C, 1, true, false, E>(out, x, m, num_tokens, rope, stream);
    }
  }
  if (stage_x) return launch<C, 1, false, true, E>(out, x, m, num_tokens, rope, stream);
  return two ? launch<C, 2, false, false, E>(out, x, m, num_tokens, rope, stream)
             : launch<C, 1, false, false, E>(out, x, m, num_tokens, rope, stream);
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

// Up to kQuantGemvFewTokensMax tokens in one launch of quant_gemv_few_tokens where it takes the shape; else the
// kernel in passes of at most kPassTokens tokens (one launch each, reading the weights again): out rows, x rows and
// the RoPE arrays move with the pass. The choice is the step's, not the pass's: each kernel rounds a token the same
// whatever the tokens beside it, but the two kernels round differently, so a pass of few tokens (17 = 16 + 1) must
// not switch kernels (the graph padded to 24 runs 16 + 8).
template <Epilogue E>
void run_passes(bf16* out, int64_t out_row, const bf16* x, const QuantMatrix& w, int num_tokens, QkvRopeOutput rope,
                cudaStream_t stream) {
  if (quant_gemv_few_tokens_takes(x, w, num_tokens)) return quant_gemv_few_tokens(E, out, rope, x, w, num_tokens, stream);
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
