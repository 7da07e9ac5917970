// The quantized GEMM's Hopper form (quant_gemm.h): warpgroup MMAs (wgmma) with the weights as the A operand in
// registers and the tokens' x as the B operand in shared memory.
//
// A block is two warpgroups of 4 warps, a warp per 16-row tile of the layout (128 rows of W a block), and 128 tokens
// (wgmma's N); grid = (token blocks, row blocks, K slices) as in the mma.sync form, two blocks an SM. The block walks
// its slice of K a chunk (64 columns, 4 k-steps) at a time through a ring of 4 stages in shared memory (cp.async, two
// chunks in flight): each stage holds those columns of the 128 tokens' x, each warp's code vectors of its tile and the
// params of the groups they touch. Each chunk a warp turns its 4 k-steps' codes into the bf16 values (q - z) s (or
// q s - m: the offsets form) of its tile's A fragments, rounded as dequantize_tiles_bf16 rounds them (so the products
// are those of the bf16 copy), and its warpgroup issues 4 wgmma m64n128k16 against the stage's x: 64 rows x 128
// tokens an instruction, where mma.sync needed 16 (the mma.sync form is bound by issuing them). The slot refilled
// each chunk is the one read two chunks ago, so a warpgroup's products run on while it waits at the barrier, issues
// the next copies and loads the next codes; it waits for them before writing the next fragments.
//
// x in shared memory: a token's 64 columns are one 128-byte row in wgmma's 128-byte swizzle (8 rows an atom of 1,024
// bytes, the 16-byte pieces of row r XOR-ed with r % 8), and within each k-step the columns are in the order the
// tile layout gives the codes: MMA column 2t, 2t + 1 holds x's 4t, 4t + 1 and MMA column 2t + 8, 2t + 9 holds 4t + 2,
// 4t + 3 (quant_tiles.h orders each lane's codes for the GEMV's 8-byte loads of x). So x is copied 4 bytes (a pair of
// columns) at a time, each pair to its place.
//
// Measured on the H200 (QuantGemm.PrintsTimesOnLlamaShapes, docs/PERFORMANCE.md): about 110 us for a 128-token block
// of gate-up (28,672 x 4,096) however few of its tokens exist, 270-320 TFLOP/s at most: faster than the mma.sync form
// for 65 to 128 tokens only (one block of 128 against two of 64), slower than it or the bf16 copy beyond.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/launch.cuh"
#include "pagoda/kernels/quant_codes.cuh"
#include "pagoda/kernels/quant_gemm.h"
#include "pagoda/kernels/quant_gemm_blocks.cuh"
#include "pagoda/kernels/wgmma.cuh"

namespace pagoda::kernels {
namespace {

constexpr int kWarps = kGemmWarps;  // two warpgroups
constexpr int kThreads = kWarps * 32;
constexpr int kBlocksPerSm = 2;
constexpr int kBlockTokens = 128;  // wgmma's N
constexpr int kStages = 4;         // a chunk of 64 columns each
constexpr int kStageSteps = kChunkSteps;
constexpr int kXRowBytes = kTileChunkCols * 2;          // 128: one swizzle row a token
constexpr int kXBytes = kBlockTokens * kXRowBytes;      // 16 KiB: whole 1,024-byte atoms
constexpr int kXPairs = kBlockTokens * kXRowBytes / 4;  // 4-byte copies of x a stage
constexpr int kXCopies = kXPairs / kThreads;            // ... a thread (16: a lane's pair in 16 tokens)
static_assert(kXRowBytes == 128 && kThreads / 32 == 8, "a warp copies one pair column of 8-token swizzle atoms");

// One stage of the ring: x [128 tokens][128 bytes, swizzled], [kWarps][V][32 lanes] code vectors, [kWarps][param_slots]
// [16] params {s, z or m}; stages start on 1,024-byte boundaries (the swizzle atoms).
struct StageLayout {
  int vectors, param_slots;
  __host__ __device__ int codes_bytes() const { return kWarps * vectors * 32 * 16; }
  __host__ __device__ int params_bytes() const { return kWarps * param_slots * kTileRows * 8; }
  __host__ __device__ int stage_bytes() const { return (kXBytes + codes_bytes() + params_bytes() + 1023) / 1024 * 1024; }
  __host__ __device__ int block_bytes() const { return kStages * stage_bytes(); }
};

// Where pair j (columns 2j, 2j + 1 of a chunk) of x goes in a token's 128-byte row before the swizzle: k-step j / 8,
// MMA column 2t for the pair 4t (j % 8 = 2t), 2t + 8 for 4t + 2 (j % 8 = 2t + 1).
__host__ __device__ constexpr int pair_offset(int j) {
  const int in_step = j % 8;
  return (j / 8) * 32 + (in_step % 2 == 0 ? in_step / 2 : 4 + in_step / 2) * 4;
}
static_assert(pair_offset(0) == 0 && pair_offset(1) == 16 && pair_offset(2) == 4 && pair_offset(7) == 28 &&
                  pair_offset(8) == 32 && pair_offset(31) == 124,
              "k-step j / 8; its pairs 0, 2, 4, 6 to bytes 0..15 and 1, 3, 5, 7 to bytes 16..31");

// 4 bytes global -> shared, zero-filled when `bytes` is 0 (without reading).
__device__ __forceinline__ void copy_async4_zfill(uint32_t shared, const void* global, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(shared), "l"(global), "r"(bytes));
}



// d [64 rows][128 tokens] (the warpgroup's fragments) += a (the warp's 16 rows x 16 columns) · B (16 x 128 at desc).
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], const uint32_t (&a)[4], uint64_t desc) {
#ifdef PAGODA_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
#endif
}


template <TileCodes C, bool kOffsets>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    quant_gemm_wgmma_kernel(bf16* __restrict__ out, float* __restrict__ partial, const bf16* __restrict__ x,
                            const Tiles w, int num_tokens, int slices, const StageLayout layout) {
  using Cd = Codes<C>;
  constexpr int V = Cd::kVectors;
  extern __shared__ __align__(1024) unsigned char ring[];

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int p = lane / 4;  // fragment row
  const int token0 = blockIdx.x * kBlockTokens;
  const int tile_index = blockIdx.y * kWarps + warp;
  const int tile = min(tile_index, w.tiles - 1);  // past the last tile: recompute it, store nothing
  const int slice = blockIdx.z;
  const KSlice range = k_slice(w, slice, slices);
  const int c_begin = range.c_begin, c_end = range.c_end, step_end = range.step_end;
  const int spg = w.steps_per_group;
  const int stage_bytes = layout.stage_bytes();
  const uint32_t ring_base = static_cast<uint32_t>(__cvta_generic_to_shared(ring));

  // What this thread copies each stage, as addresses at the slice's first stage: pair `lane` of tokens warp, warp + 8,
  // .. (rows r with r % 8 = warp: the same swizzled place in each), its code vectors, the params of its tile's groups.
  const int piece = pair_offset(lane) / 16;
  const uint32_t x_dst = warp * kXRowBytes + (((piece ^ warp) * 16) | (pair_offset(lane) % 16));
  const bf16* x_src = x + static_cast<int64_t>(token0 + warp) * w.k + kTileChunkCols * c_begin + 2 * lane;
  const int64_t x_pass = int64_t{8} * w.k;  // elements between a thread's tokens
  uint32_t x_rows = 0;                       // which of the thread's 16 tokens exist (a bit each)
#pragma unroll
  for (int i = 0; i < kXCopies; ++i) x_rows |= static_cast<uint32_t>(token0 + warp + 8 * i < num_tokens) << i;
  int x_step = kStageSteps * c_begin + lane / 8;  // the k-step of the thread's pair, this stage
  const uint4* code_src = w.codes + (static_cast<int64_t>(tile) * w.chunks + c_begin) * V * 32 + lane;
  const uint32_t code_dst = kXBytes + (warp * V * 32 + lane) * 16;
  const float4* param_src = reinterpret_cast<const float4*>(w.params + static_cast<int64_t>(tile) * w.groups * kTileRows);
  const uint32_t param_dst = kXBytes + layout.codes_bytes() + warp * layout.param_slots * kTileRows / 2 * 16;
  const int param_vectors = layout.param_slots * kTileRows / 2;
  int issue_group = kStageSteps * c_begin / spg, issue_end = (issue_group + 1) * spg;

  // The next chunk into ring slot `slot` (nothing past the slice: block-uniform). Every slot of params is filled from
  // the chunk's first group on, short of the tile's last group.
  int c_issue = c_begin;
  auto issue = [&](int slot) {
    if (c_issue >= c_end) return;
    const uint32_t s = ring_base + slot * stage_bytes;
    const bool cols = x_step < w.k / kTileStepCols;
#pragma unroll
    for (int i = 0; i < kXCopies; ++i) {  // zeros past T and K (wgmma multiplies them by zeros, or into unused sums)
      const bool copy = cols && (x_rows >> i & 1);
      copy_async4_zfill(s + x_dst + i * 8 * kXRowBytes, copy ? x_src + i * x_pass : x, copy ? 4 : 0);
    }
    x_src += kTileChunkCols;
    x_step += kStageSteps;
#pragma unroll
    for (int v = 0; v < V; ++v) copy_weights_async16_to(s + code_dst + v * 512, code_src + v * 32);
    code_src += V * 32;
    while (issue_end <= kStageSteps * c_issue) {
      ++issue_group;
      issue_end += spg;
    }
    for (int v = lane; v < param_vectors; v += 32) {
      if (issue_group * kTileRows / 2 + v < w.groups * kTileRows / 2)
        copy_weights_async16_to(s + param_dst + v * 16, param_src + issue_group * kTileRows / 2 + v);
    }
    ++c_issue;
  };

  float d[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) d[i] = 0.0f;
  pdl_grid_sync();
  // Chunks in flight: kAhead; the slot refilled is the one read two chunks ago.
  constexpr int kAhead = kStages - 2;
#pragma unroll
  for (int j = 0; j < kAhead; ++j) {
    issue(j);
    copy_async_commit();
  }
  int group_end = (kStageSteps * c_begin / spg + 1) * spg;  // the k-step after the current group's last
  for (int c = c_begin, slot = 0; c < c_end; ++c, slot = slot + 1 == kStages ? 0 : slot + 1) {  // block-uniform
    copy_async_wait<kAhead - 1>();  // this thread's copies of the stage have landed
    __syncthreads();  // ... and everyone's; every warpgroup is done with the slot refilled next (read two chunks ago)
    issue((slot + kAhead) % kStages);
    copy_async_commit();
    const unsigned char* s = ring + slot * stage_bytes;
    uint4 wv[V];
#pragma unroll
    for (int v = 0; v < V; ++v) wv[v] = reinterpret_cast<const uint4*>(s + kXBytes)[(warp * V + v) * 32 + lane];
    const float2* gp = reinterpret_cast<const float2*>(s + kXBytes + layout.codes_bytes()) +
                       warp * layout.param_slots * kTileRows;  // [param_slots][16 positions]
    int gi = 0;
    float2 lo = gp[p], hi = gp[p + 8];
    typename Cd::Zero zero = kOffsets ? Cd::zero(0.0f, 0.0f) : Cd::zero(lo.y, hi.y);
    uint32_t x_base = ring_base + slot * stage_bytes;
    {
      wgmma_wait<0>();  // the last chunk's products have read their fragments and descriptors ...
      asm volatile("" : "+r"(x_base)::"memory");  // ... and no new ones are written above the wait
#pragma unroll
      for (int v = 0; v < V; ++v) asm volatile("" : "+r"(wv[v].x), "+r"(wv[v].y), "+r"(wv[v].z), "+r"(wv[v].w)::"memory");
    }
    const uint64_t desc = swizzled_rows_descriptor(x_base);
    uint32_t a[kStageSteps][4];
#pragma unroll
    for (int ks = 0; ks < kStageSteps; ++ks) {
      const int step = kStageSteps * c + ks;
      if (step == group_end) {  // block-uniform
        ++gi;
        group_end += spg;
        lo = gp[gi * kTileRows + p];
        hi = gp[gi * kTileRows + p + 8];
        if (!kOffsets) zero = Cd::zero(lo.y, hi.y);
      }
      Cd::fragment(a[ks], wv, ks, zero);
      // Past K (the last chunk of a K that is not a multiple of 64): zeros. (A mask, not a select: a constant
      // written into the fragment could be placed above the wait for the products still reading it.)
      const uint32_t in_k = step < step_end ? ~0u : 0u;
      a[ks][0] = in_k & scaled<kOffsets>(a[ks][0], lo.x, lo.y);
      a[ks][1] = in_k & scaled<kOffsets>(a[ks][1], hi.x, hi.y);
      a[ks][2] = in_k & scaled<kOffsets>(a[ks][2], lo.x, lo.y);
      a[ks][3] = in_k & scaled<kOffsets>(a[ks][3], hi.x, hi.y);
    }
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kStageSteps; ++ks) wgmma_m64n128k16(d, a[ks], desc + 2 * ks);  // 32 bytes into each row a k-step
    wgmma_commit();
    // The next chunk starts in this group unless it ended with the chunk.
    if (kStageSteps * (c + 1) == group_end) group_end += spg;
  }
  wgmma_wait<0>();
  fence_accumulators(d);
  copy_async_wait<0>();
  if (tile_index >= w.tiles) return;

  store_tile_sums<kBlockTokens / 8>(out, partial, w, tile, token0, num_tokens, slice, slices,
                                    [&](int j, int e) { return d[4 * j + e]; });  // wgmma's fragments, as mma.sync's
}

int token_blocks(int num_tokens) { return (num_tokens + kBlockTokens - 1) / kBlockTokens; }

template <TileCodes C, bool kOffsets>
void launch(bf16* out, float* partial, const bf16* x, const Tiles& w, int num_tokens, int slices, cudaStream_t stream) {
  const StageLayout layout{Codes<C>::kVectors, stage_groups(w.steps_per_group, kStageSteps)};
  auto* kernel = quant_gemm_wgmma_kernel<C, kOffsets>;
  static const int configured_bytes = opt_in_shared_memory(kernel, "quant_gemm_wgmma");
  if (layout.block_bytes() > configured_bytes)
    throw_cuda_error(cudaErrorInvalidValue, "quant_gemm_wgmma: the ring does not fit in shared memory", __FILE__, __LINE__);
  const dim3 grid(static_cast<unsigned>(token_blocks(num_tokens)), static_cast<unsigned>((w.tiles + kWarps - 1) / kWarps),
                  static_cast<unsigned>(slices));
  launch_kernel("quant_gemm_wgmma", kernel, grid, kThreads, static_cast<size_t>(layout.block_bytes()), stream, out, partial,
                x, w, num_tokens, slices, layout);
}

}  // namespace

bool quant_gemm_wgmma_available() { return compute_capability() == 90; }  // sm_90a code: Hopper only

bool quant_gemm_wgmma_supported(const void* x, const QuantMatrix& w, int num_tokens) {
  const QuantTilesShape& s = w.shape;
  return quant_gemm_wgmma_available() && num_tokens >= 1 && s.n > 0 && s.k > 0 && s.k % kTileStepCols == 0 &&
         (s.group_size >= s.k || s.group_size % kTileStepCols == 0) && !(s.offsets && s.codes == TileCodes::kE4M3) &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0 && w.codes && w.params && s.tiles() < (int64_t{1} << 31) &&
         s.tiles() / kWarps < 65535 && static_cast<int64_t>(num_tokens) * s.k < (int64_t{1} << 31) &&
         (num_tokens + kBlockTokens - 1) / kBlockTokens < (int64_t{1} << 31);
}

int quant_gemm_wgmma_min_tokens() {
  static const int tokens = [] {
    const int n = env_int("PAGODA_QUANT_WGMMA_MIN_TOKENS", kQuantGemmWgmmaMinTokens);
    return n <= 0 ? std::numeric_limits<int>::max() : n;
  }();
  return tokens;
}

bool quant_gemm_wgmma_takes(const void* x, const QuantMatrix& w, int num_tokens) {
  return num_tokens >= quant_gemm_wgmma_min_tokens() && num_tokens <= kQuantGemmWgmmaMaxTokens &&
         quant_gemm_wgmma_supported(x, w, num_tokens);
}

size_t quant_gemm_wgmma_workspace_bytes(const QuantMatrix& m, int num_tokens) {
  const int slices = k_slices(tiles_of(m), token_blocks(num_tokens), kBlocksPerSm);
  return slices == 1 ? 0 : static_cast<size_t>(slices) * num_tokens * m.shape.n * sizeof(float);
}

void quant_gemm_wgmma(bf16* out, const bf16* x, const QuantMatrix& m, int num_tokens, void* workspace,
                      cudaStream_t stream) {
  if (num_tokens <= 0) return;
  if (!quant_gemm_wgmma_supported(x, m, num_tokens))
    throw_cuda_error(cudaErrorInvalidValue, "quant_gemm_wgmma: shape, alignment or device not supported", __FILE__,
                     __LINE__);
  const Tiles w = tiles_of(m);
  const int slices = k_slices(w, token_blocks(num_tokens), kBlocksPerSm);
  auto* partial = static_cast<float*>(workspace);
  if (slices > 1 && !partial)
    throw_cuda_error(cudaErrorInvalidValue, "quant_gemm_wgmma: no workspace", __FILE__, __LINE__);
  const bool offsets = m.shape.offsets;
  switch (m.shape.codes) {
    case TileCodes::kU4:
      offsets ? launch<TileCodes::kU4, true>(out, partial, x, w, num_tokens, slices, stream)
              : launch<TileCodes::kU4, false>(out, partial, x, w, num_tokens, slices, stream);
      break;
    case TileCodes::kI8:
      offsets ? launch<TileCodes::kI8, true>(out, partial, x, w, num_tokens, slices, stream)
              : launch<TileCodes::kI8, false>(out, partial, x, w, num_tokens, slices, stream);
      break;
    case TileCodes::kE4M3: launch<TileCodes::kE4M3, false>(out, partial, x, w, num_tokens, slices, stream); break;
  }
  if (slices > 1) add_k_slices(out, partial, static_cast<int64_t>(num_tokens) * w.n, slices, stream);
}

}  // namespace pagoda::kernels
