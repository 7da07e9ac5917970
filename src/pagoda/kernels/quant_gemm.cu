// The quantized GEMM for many tokens (quant_gemm.h).
//
// A block is 8 warps over 8 tiles of 16 rows (128 rows of W) and 64 tokens; grid = (token blocks, row blocks, K
// slices), token blocks fastest so that the blocks reading the same rows run together and share them in L2. The
// block walks its slice of K two chunks (128 columns) at a time through a ring of 3 stages in shared memory, two in
// flight (cp.async): each stage holds those columns of the 64 tokens' x (rows padded to 288 bytes, so that the
// 8-byte fragment loads of a half-warp hit 32 banks), each warp's code vectors of its tile and the params of the
// groups they touch. Each k-step of 16 columns a warp then turns its 8 codes a lane into bf16 MMA registers as the
// GEMV does (quant_codes.cuh: exact small integers, q - z) and multiplies them by the 8 token tiles' x fragments into
// 8 chains of group sums, scaled into the accumulators in fp32 at each group's end. A token's outputs do not depend
// on the tokens beside it (for one count of K slices). When the grid of token and row blocks is short of the GPU's
// resident blocks (few rows, few tokens), K is cut into slices whose fp32 sums go to a workspace and are added in
// slice order by a second kernel (deterministic; no atomics).
// Measured on the H200 (QuantGemm.PrintsTimesOnLlamaShapes, docs/PERFORMANCE.md): 130-240 TFLOP/s at 64 to 128
// tokens, up to 285 at 1,024; issue-bound (Nsight Compute on the form before: 8.2 instructions an MMA, the tensor
// pipe active 41% of the time).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/launch.cuh"
#include "pagoda/kernels/quant_codes.cuh"
#include "pagoda/kernels/quant_gemm.h"
#include "pagoda/kernels/quant_gemm_blocks.cuh"

namespace pagoda::kernels {
namespace {

constexpr int kWarps = kGemmWarps;
constexpr int kThreads = kWarps * 32;
constexpr int kBlocksPerSm = 2;
constexpr int kBlockTokens = 64;
constexpr int kTokenTiles = kBlockTokens / 8;
constexpr int kStageChunks = 2;  // 128 columns a stage
constexpr int kStageSteps = 4 * kStageChunks;
constexpr int kStages = 3;
constexpr int kXRowBytes = kStageChunks * kTileChunkCols * 2 + 32;  // padded: rows p = 0..3 start 8 banks apart
constexpr int kXCopies = kBlockTokens * kStageChunks * 8 / kThreads;  // 16-byte vectors of x a thread copies a stage

// One stage of the ring: [64 tokens][kXRowBytes] x, [kWarps][kStageChunks V][32 lanes] code vectors,
// [kWarps][param_slots][16] params {s, z}.
struct StageLayout {
  int vectors, param_slots;
  __host__ __device__ static constexpr int x_bytes() { return kBlockTokens * kXRowBytes; }
  __host__ __device__ int codes_bytes() const { return kWarps * kStageChunks * vectors * 32 * 16; }
  __host__ __device__ int params_bytes() const { return kWarps * param_slots * kTileRows * 8; }
  __host__ __device__ int stage_bytes() const { return x_bytes() + codes_bytes() + params_bytes(); }
  __host__ __device__ int block_bytes() const { return kStages * stage_bytes(); }
};

template <TileCodes C>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    quant_gemm_kernel(bf16* __restrict__ out, float* __restrict__ partial, const bf16* __restrict__ x, const Tiles w,
                      int num_tokens, int slices, const StageLayout layout) {
  using Cd = Codes<C>;
  constexpr int V = Cd::kVectors;
  extern __shared__ __align__(16) unsigned char ring[];

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int p = lane / 4, t = lane % 4;  // fragment row and column group
  const int token0 = blockIdx.x * kBlockTokens;
  const int tile_index = blockIdx.y * kWarps + warp;
  const int tile = min(tile_index, w.tiles - 1);  // past the last tile: recompute it, store nothing
  const int slice = blockIdx.z;
  const KSlice range = k_slice(w, slice, slices);
  const int c_begin = range.c_begin, c_end = range.c_end, step_end = range.step_end;
  const int spg = w.steps_per_group;
  const int stage_bytes = layout.stage_bytes();
  const uint32_t ring_base = static_cast<uint32_t>(__cvta_generic_to_shared(ring));

  // What this thread copies each stage, as addresses at the slice's first stage that move by a stage's bytes: its
  // vectors of x (zeros past T and past K), its code vectors, and (lanes of the warp) the params of its tile's groups.
  constexpr int kRowsPerPass = kThreads / (kStageChunks * 8);
  const int x_part = threadIdx.x % (kStageChunks * 8), x_row0 = threadIdx.x / (kStageChunks * 8);
  const bf16* x_src = x + static_cast<int64_t>(token0 + x_row0) * w.k + kTileChunkCols * c_begin + 8 * x_part;
  const int64_t x_pass = static_cast<int64_t>(kRowsPerPass) * w.k;  // elements between a thread's rows
  const uint32_t x_dst = x_row0 * kXRowBytes + 16 * x_part;
  int x_rows = 0;  // how many of the thread's rows are tokens (a bit each)
#pragma unroll
  for (int i = 0; i < kXCopies; ++i) x_rows |= (token0 + x_row0 + i * kRowsPerPass < num_tokens) << i;
  int x_cols_left = w.k - (kTileChunkCols * c_begin + 8 * x_part);  // columns from the thread's first, this stage
  const uint4* code_src = w.codes + (static_cast<int64_t>(tile) * w.chunks + c_begin) * V * 32 + lane;
  const uint32_t code_dst = StageLayout::x_bytes() + (warp * kStageChunks * V * 32 + lane) * 16;
  const float4* param_src = reinterpret_cast<const float4*>(w.params + static_cast<int64_t>(tile) * w.groups * kTileRows);
  const uint32_t param_dst = StageLayout::x_bytes() + layout.codes_bytes() + (warp * layout.param_slots * kTileRows / 2 + lane) * 16;
  const int param_vectors = layout.param_slots * kTileRows / 2;
  int issue_group = 4 * c_begin / spg, issue_end = (issue_group + 1) * spg;  // the group of the next stage's first k-step

  // The next stage (chunks c .. c + 1) into ring slot `slot` (nothing past the slice: block-uniform). Every slot of
  // params is filled from the stage's first group on, short of the tile's last group.
  int c_issue = c_begin;
  auto issue = [&](int slot) {
    if (c_issue >= c_end) return;
    const uint32_t s = ring_base + slot * stage_bytes;
    const bool cols = x_cols_left > 0;
#pragma unroll
    for (int i = 0; i < kXCopies; ++i) {
      const bool copy = cols && (x_rows >> i & 1);
      copy_async16_zfill(s + x_dst + i * kRowsPerPass * kXRowBytes, copy ? x_src + i * x_pass : x, copy ? 16 : 0);
    }
    x_src += kStageChunks * kTileChunkCols;
    x_cols_left -= kStageChunks * kTileChunkCols;
#pragma unroll
    for (int v = 0; v < kStageChunks * V; ++v) {
      if (v < (c_end - c_issue) * V) copy_weights_async16_to(s + code_dst + v * 512, code_src + v * 32);
    }
    code_src += kStageChunks * V * 32;
    while (issue_end <= 4 * c_issue) {
      ++issue_group;
      issue_end += spg;
    }
#pragma unroll
    for (int j = 0; j < kStageSteps * kTileRows / 2 / 32; ++j) {  // up to one group a k-step: 8 vectors each
      const int v = lane + 32 * j;
      if (v < param_vectors && issue_group * kTileRows / 2 + v < w.groups * kTileRows / 2)
        copy_weights_async16_to(s + param_dst + 512 * j, param_src + issue_group * kTileRows / 2 + v);
    }
    c_issue += kStageChunks;
  };

  float acc[kTokenTiles][4], part[kTokenTiles][4];
#pragma unroll
  for (int j = 0; j < kTokenTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = part[j][e] = 0.0f;
  }
  pdl_grid_sync();
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) {
    issue(j);
    copy_async_commit();
  }
  int group = 4 * c_begin / spg;  // the current group, and the k-step after its last
  int group_end = min((group + 1) * spg, step_end);
  for (int c = c_begin, slot = 0; c < c_end; c += kStageChunks, slot = slot + 1 == kStages ? 0 : slot + 1) {  // block-uniform
    copy_async_wait<kStages - 2>();  // this thread's copies of the stage have landed
    __syncthreads();                  // ... and everyone's; everyone is done with the slot refilled next
    issue(slot == 0 ? kStages - 1 : slot - 1);
    copy_async_commit();
    const unsigned char* s = ring + slot * stage_bytes;
    uint4 wv[kStageChunks][V];
#pragma unroll
    for (int u = 0; u < kStageChunks; ++u) {
#pragma unroll
      for (int v = 0; v < V; ++v)
        wv[u][v] = reinterpret_cast<const uint4*>(s + StageLayout::x_bytes())[(warp * kStageChunks * V + u * V + v) * 32 + lane];
    }
    const float2* gp = reinterpret_cast<const float2*>(s + StageLayout::x_bytes() + layout.codes_bytes()) +
                       warp * layout.param_slots * kTileRows;  // [param_slots][16 positions]
    typename Cd::Zero zero = Cd::zero(gp[p].y, gp[p + 8].y);
    const int g_first = group;
    const unsigned char* xs = s + p * kXRowBytes + 8 * t;  // token p of each token tile, columns 4t ..
#pragma unroll
    for (int ks = 0; ks < kStageSteps; ++ks) {
      const int step = 4 * c + ks;
      if (step >= step_end) break;  // block-uniform
      uint32_t a[4];
      Cd::fragment(a, wv[ks / 4], ks % 4, zero);
#pragma unroll
      for (int j = 0; j < kTokenTiles; ++j) {
        const uint2 b = *reinterpret_cast<const uint2*>(xs + j * 8 * kXRowBytes + ks * kTileStepCols * 2);
        mma_bf16(part[j], a, b.x, b.y);
      }
      if (step + 1 == group_end) {  // block-uniform
        const int gi = group - g_first;
        const float s_lo = gp[gi * kTileRows + p].x, s_hi = gp[gi * kTileRows + p + 8].x;
#pragma unroll
        for (int j = 0; j < kTokenTiles; ++j) {
          acc[j][0] += s_lo * part[j][0];
          acc[j][1] += s_lo * part[j][1];
          acc[j][2] += s_hi * part[j][2];
          acc[j][3] += s_hi * part[j][3];
#pragma unroll
          for (int e = 0; e < 4; ++e) part[j][e] = 0.0f;
        }
        if (ks < kStageSteps - 1 && step + 1 < step_end)
          zero = Cd::zero(gp[(gi + 1) * kTileRows + p].y, gp[(gi + 1) * kTileRows + p + 8].y);
        ++group;
        group_end = min(group_end + spg, step_end);
      }
    }
  }
  copy_async_wait<0>();
  if (tile_index >= w.tiles) return;

  store_tile_sums<kTokenTiles>(out, partial, w, tile, token0, num_tokens, slice, slices,
                               [&](int j, int e) { return acc[j][e]; });
}

// out [count] = the sum of the slices' partial sums [slices][count], in slice order.
__global__ void add_slices_kernel(bf16* __restrict__ out, const float* __restrict__ partial, int64_t count, int slices) {
  pdl_grid_sync();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = partial[i];
    for (int s = 1; s < slices; ++s) sum += partial[s * count + i];
    out[i] = __float2bfloat16_rn(sum);
  }
}

int token_blocks(int num_tokens) { return (num_tokens + kBlockTokens - 1) / kBlockTokens; }

template <TileCodes C>
void launch(bf16* out, float* partial, const bf16* x, const Tiles& w, int num_tokens, int slices, cudaStream_t stream) {
  const StageLayout layout{Codes<C>::kVectors, stage_groups(w.steps_per_group, kStageSteps)};
  static const int configured_bytes = opt_in_shared_memory(quant_gemm_kernel<C>, "quant_gemm");
  if (layout.block_bytes() > configured_bytes)
    throw_cuda_error(cudaErrorInvalidValue, "quant_gemm: the ring does not fit in shared memory", __FILE__, __LINE__);
  const dim3 grid(static_cast<unsigned>(token_blocks(num_tokens)), static_cast<unsigned>((w.tiles + kWarps - 1) / kWarps),
                  static_cast<unsigned>(slices));
  launch_kernel("quant_gemm", quant_gemm_kernel<C>, grid, kThreads, static_cast<size_t>(layout.block_bytes()), stream, out,
                partial, x, w, num_tokens, slices, layout);
}

}  // namespace

int quant_gemm_max_tokens() {
  static const int tokens = std::max(0, env_int("PAGODA_QUANT_GEMM_MAX_TOKENS", kQuantGemmMaxTokens));
  return tokens;
}

bool quant_gemm_supported(const void* x, const QuantMatrix& w, int num_tokens) {
  const QuantTilesShape& s = w.shape;
  return num_tokens >= 1 && num_tokens <= quant_gemm_max_tokens() && !s.offsets && s.n > 0 && s.k > 0 &&
         s.k % kTileStepCols == 0 && (s.group_size >= s.k || s.group_size % kTileStepCols == 0) &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0 && w.codes && w.params && s.tiles() < (int64_t{1} << 31) &&
         s.tiles() / kWarps < 65535 && static_cast<int64_t>(num_tokens) * s.k < (int64_t{1} << 31);
}

size_t quant_gemm_workspace_bytes(const QuantMatrix& m, int num_tokens) {
  const int slices = k_slices(tiles_of(m), token_blocks(num_tokens), kBlocksPerSm);
  return slices == 1 ? 0 : static_cast<size_t>(slices) * num_tokens * m.shape.n * sizeof(float);
}

void quant_gemm(bf16* out, const bf16* x, const QuantMatrix& m, int num_tokens, void* workspace, cudaStream_t stream) {
  if (num_tokens <= 0) return;
  if (!quant_gemm_supported(x, m, num_tokens))
    throw_cuda_error(cudaErrorInvalidValue, "quant_gemm: shape or alignment not supported", __FILE__, __LINE__);
  const Tiles w = tiles_of(m);
  const int slices = k_slices(w, token_blocks(num_tokens), kBlocksPerSm);
  auto* partial = static_cast<float*>(workspace);
  if (slices > 1 && !partial) throw_cuda_error(cudaErrorInvalidValue, "quant_gemm: no workspace", __FILE__, __LINE__);
  switch (m.shape.codes) {
    case TileCodes::kU4: launch<TileCodes::kU4>(out, partial, x, w, num_tokens, slices, stream); break;
    case TileCodes::kI8: launch<TileCodes::kI8>(out, partial, x, w, num_tokens, slices, stream); break;
    case TileCodes::kE4M3: launch<TileCodes::kE4M3>(out, partial, x, w, num_tokens, slices, stream); break;
  }
  if (slices > 1) add_k_slices(out, partial, static_cast<int64_t>(num_tokens) * w.n, slices, stream);
}

void add_k_slices(bf16* out, const float* partial, int64_t count, int slices, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((count + 255) / 256, int64_t{sm_count()} * 8));
  launch_kernel("quant_gemm_add_slices", add_slices_kernel, blocks, 256, 0, stream, out, partial, count, slices);
}

}  // namespace pagoda::kernels
