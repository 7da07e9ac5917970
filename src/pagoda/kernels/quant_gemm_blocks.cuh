// What the quantized GEMM's two forms (quant_gemm.cu on mma.sync, quant_gemm_wgmma.cu on wgmma) share about their
// blocks: a block is 8 warps, a 16-row tile of the layout each (128 rows of W), over a block of tokens and a slice of
// K; a stage of its ring holds the params of the groups its k-steps touch; grids short of the GPU cut K into slices
// whose fp32 sums add_k_slices adds in slice order; the sums leave as the GEMV stores them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/gemm_epilogue.cuh"
#include "pagoda/kernels/launch.cuh"
#include "pagoda/kernels/quant_codes.cuh"

namespace pagoda::kernels {
namespace {

constexpr int kGemmWarps = 8;  // a tile of 16 rows each: 128 rows of W a block
constexpr int kChunkSteps = kTileChunkCols / kTileStepCols;
constexpr int kMinChunksPerSlice = 4;
constexpr int kMaxSlices = 8;

// Block slice `slice` of `slices` along K: chunks [c_begin, c_end), and the k-step past its last (K itself may end
// inside the last chunk).
struct KSlice {
  int c_begin, c_end, step_end;
};
__device__ __forceinline__ KSlice k_slice(const Tiles& w, int slice, int slices) {
  const int c_begin = static_cast<int>(static_cast<int64_t>(w.chunks) * slice / slices);
  const int c_end = static_cast<int>(static_cast<int64_t>(w.chunks) * (slice + 1) / slices);
  return {c_begin, c_end, min(kChunkSteps * c_end, w.k / kTileStepCols)};
}

// Groups (spg k-steps from multiples of spg) that `stage_steps` k-steps from any chunk's first can touch: the param
// slots a stage holds. From spg = stage_steps on a stage meets at most one boundary, and does when some chunk starts
// within stage_steps of one (its offset in a group reaches spg - gcd(chunk steps, spg)).
inline int stage_groups(int spg, int stage_steps) {
  if (spg >= stage_steps) return std::gcd(kChunkSteps, spg) < stage_steps ? 2 : 1;
  int most = 1;
  for (int start = 0; start < kChunkSteps * spg; start += kChunkSteps)
    most = std::max(most, (start + stage_steps - 1) / spg - start / spg + 1);
  return most;
}

// Slices of K for a grid of token_blocks x row blocks when an SM holds blocks_per_sm: enough that the grid fills the
// GPU once when it falls short of three quarters of it, each at least kMinChunksPerSlice chunks. Host values only (a
// padded graph and its eager step cut alike).
inline int k_slices(const Tiles& w, int token_blocks, int blocks_per_sm) {
  const int64_t blocks = static_cast<int64_t>(token_blocks) * ((w.tiles + kGemmWarps - 1) / kGemmWarps);
  const int64_t resident = static_cast<int64_t>(sm_count()) * blocks_per_sm;
  if (4 * blocks >= 3 * resident) return 1;
  const int64_t wanted = (resident + blocks - 1) / blocks;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({wanted, kMaxSlices, w.chunks / kMinChunksPerSlice})));
}

// Raises `kernel`'s dynamic shared memory to the device's opt-in limit (and prefers shared memory over L1); returns
// the limit. For a function-local static: once a kernel.
template <class Kernel>
int opt_in_shared_memory(Kernel kernel, const char* name) {
  int device = 0, optin = 0;
  cuda_check(cudaGetDevice(&device), name, __FILE__, __LINE__);
  cuda_check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), name, __FILE__, __LINE__);
  cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin), name, __FILE__, __LINE__);
  cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared),
             name, __FILE__, __LINE__);
  return optin;
}

// A warp's sums of its tile for the block's tokens: lane (p, t) holds rows 2p and 2p + 1 of the tile (positions p,
// p + 8) for tokens token0 + 8j + 2t + h as sum(j, h) and sum(j, 2 + h). They go to out as the GEMV stores them, or
// with K in slices to this slice's fp32 partial sums [slices][num_tokens][n].
template <int kTokenTiles, class Sum>
__device__ __forceinline__ void store_tile_sums(bf16* out, float* partial, const Tiles& w, int tile, int token0,
                                                int num_tokens, int slice, int slices, const Sum& sum) {
  const int lane = threadIdx.x % 32, p = lane / 4, t = lane % 4;
  const int row = tile * kTileRows + 2 * p;
#pragma unroll
  for (int j = 0; j < kTokenTiles; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int token = token0 + 8 * j + 2 * t + h;
      if (token >= num_tokens) continue;
      if (slices == 1) {
        store_rows<Epilogue::kPlain>(out, QkvRopeOutput{}, w.n, token, row, sum(j, h), 0.0f);
        store_rows<Epilogue::kPlain>(out, QkvRopeOutput{}, w.n, token, row + 1, sum(j, 2 + h), 0.0f);
      } else {
        float* o = partial + (static_cast<int64_t>(slice) * num_tokens + token) * w.n;
        if (row < w.n) o[row] = sum(j, h);
        if (row + 1 < w.n) o[row + 1] = sum(j, 2 + h);
      }
    }
  }
}

}  // namespace
}  // namespace pagoda::kernels
