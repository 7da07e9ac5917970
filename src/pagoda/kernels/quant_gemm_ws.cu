// The quantized GEMM's warp-specialized Hopper form (quant_gemm.h): one warpgroup turns the codes into bf16 tiles in
// shared memory while two others multiply them by the tokens' x with warpgroup MMAs (wgmma, both operands in shared
// memory), so that the conversion runs beside the tensor cores instead of between their instructions (the register
// form, quant_gemm_wgmma.cu, waits for its products before it converts the next chunk).
//
// A block is 128 rows of W (8 tiles of the layout) by 256 tokens, one an SM, 384 threads; grid = (token blocks, row
// blocks, K slices), K slices chosen by estimated time (ws_slices). Its K slice goes a chunk (64 columns, 4 k-steps)
// at a time through a ring of 4 stages, each holding
//   x      [256 tokens][128 bytes]  the chunk's columns of x in wgmma's 128-byte swizzle (8-row atoms of 1,024 bytes,
//                                   the 16-byte pieces of row r XOR-ed with r % 8), copied by the consumers 3 chunks
//                                   early (zeros past T and K);
//   values [128 rows][128 bytes]    the chunk's weights as bf16, the same swizzle, row = tile * 16 + tile position
//                                   (quant_tiles.h), so the products leave in the GEMV's order;
// beside the converter's own ring of code vectors (4 slots, copied 3 chunks early by the thread that reads them).
// Converter warp w takes tiles 2w and 2w + 1, lane (p, t) the codes the GEMV's lane would; it writes chunk i's values
// once the consumers have released chunk i - 4, then a proxy fence (wgmma reads shared memory through the async proxy)
// and an arrival on the stage's `full` mbarrier, which the consumers' copies of x also arrive on. Consumer warpgroup g
// multiplies rows 64g .. 64g + 63 by the 256 tokens, 4 wgmma m64n256k16 a chunk into 128 fp32 sums a thread, and
// releases chunk i - 1 on the `empty` mbarrier once chunk i is issued and i - 1 is done.
//
// Values: (q - z) s for 4-bit codes with zero points in groups of whole chunks (AWQ, GPTQ) as bf16 pairs, v s_hi +
// bf16(v s_lo) rounded once (times_split): the bf16 copy's values exactly for half-precision scales (the fp16 of AWQ and
// GPTQ checkpoints, compressed-tensors' bf16), within one bf16 ulp of them for fp32 scales (about 7 in 10,000 differ;
// QuantGemmWarpSpecialized.SplitScales*); every other form in fp32 as dequantize_tiles_bf16.
//
// Measured on an H100 (QuantGemm.PrintsTimesOnLlamaShapes, docs/PERFORMANCE.md): Llama-3-8B's four products at 256
// tokens take 41, 26, 137 and 67 us (QKV, O, gate-up, down; the bf16 copy + cuBLAS 55, 40, 218, 138), 430-450
// TFLOP/s on the large ones; the converter is what bounds it (without its conversion, gate-up takes 102 us). Past
// 512 tokens the bf16 copy and cuBLAS's GEMM (600+ TFLOP/s) are faster again.
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

constexpr int kConverterThreads = 128;  // one warpgroup
constexpr int kConsumerThreads = 256;   // two warpgroups
constexpr int kThreads = kConverterThreads + kConsumerThreads;
constexpr int kTilesPerConverterWarp = 2;  // 8 tiles, 4 warps
constexpr int kBlockRows = 128;        // 8 tiles
constexpr int kBlockTokens = 256;      // wgmma's N
constexpr int kRowBytes = kTileChunkCols * 2;  // 128: a chunk of bf16, one swizzle row
constexpr int kXBytes = kBlockTokens * kRowBytes;      // 32 KiB
constexpr int kValuesBytes = kBlockRows * kRowBytes;   // 16 KiB
static_assert(kGemmWarps * kTileRows == kBlockRows, "the shared grid and K-slice rules count 128-row blocks");

constexpr int kStages = 4;       // x and values: chunk i in stage i % kStages
constexpr int kCodeSlots = 4;    // the converter's own ring of code vectors, copied kCodeSlots - 1 chunks early
constexpr int kXAhead = kStages - 1;  // the consumers copy x this many chunks early
constexpr int kXCopies = kBlockTokens * kRowBytes / 16 / kConsumerThreads;  // 16-byte copies a consumer thread a chunk

struct StageLayout {
  int vectors;  // code vectors a tile a lane (Codes<C>::kVectors)
  __host__ __device__ static constexpr int stage_bytes() { return kXBytes + kValuesBytes; }
  __host__ __device__ int code_slot_bytes() const { return kTilesPerConverterWarp * vectors * kConverterThreads * 16; }
  // Stages, then the code slots, then the mbarriers (full and empty, 8 bytes each a stage).
  __host__ __device__ int codes_offset() const { return kStages * stage_bytes(); }
  __host__ __device__ int barriers_offset() const { return codes_offset() + kCodeSlots * code_slot_bytes(); }
  __host__ __device__ int block_bytes() const { return barriers_offset() + kStages * 16; }
};

// The mbarriers (sm_90 PTX; the kernel runs on Hopper only, other targets compile it empty of them).
__device__ __forceinline__ void barrier_init(uint32_t bar, int count) {
#ifdef PAGODA_WGMMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
__device__ __forceinline__ void barrier_arrive(uint32_t bar) {
#ifdef PAGODA_WGMMA
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}" ::"r"(bar) : "memory");
#endif
}
// Waits until the barrier's phase of this parity has completed.
__device__ __forceinline__ void barrier_wait(uint32_t bar, uint32_t parity) {
#ifdef PAGODA_WGMMA
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}
// Generic-proxy writes to shared memory (st.shared, cp.async) made visible to the async proxy (wgmma's reads).
__device__ __forceinline__ void fence_proxy_async() {
#ifdef PAGODA_WGMMA
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// d [64 rows][256 tokens] += A (64 x 16 at a) · B (16 x 256 at b), both K-major in the 128-byte swizzle.
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t a, uint64_t b) {
#ifdef PAGODA_WGMMA
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, 1, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]),
        "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]),
        "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]),
        "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b));
#endif
}

// The params {s, z or m} of rows p and p + 8 of two tiles for the 4 k-steps of a chunk. One group a chunk when the
// groups are whole chunks (kOneGroup: k-step 0's stand for all four; the caller says which group).
template <bool kOneGroup>
struct ChunkParams {
  static constexpr int kSteps = kOneGroup ? 1 : kChunkSteps;
  float2 lo[kSteps][kTilesPerConverterWarp], hi[kSteps][kTilesPerConverterWarp];

  // kOneGroup: group `g`; otherwise the groups of chunk c's k-steps: the first one's, g0, plus the group ends before
  // k-step ks (at most 3: groups of one k-step).
  __device__ void load(const Tiles& w, const int (&tiles)[kTilesPerConverterWarp], int p, int c, int g) {
    const int spg = w.steps_per_group, g0 = kOneGroup ? g : kChunkSteps * c / spg;
    const int o = kChunkSteps * c - g0 * spg;
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      if (!kOneGroup) g = min(g0 + (o + ks >= spg) + (o + ks >= 2 * spg) + (o + ks >= 3 * spg), w.groups - 1);
#pragma unroll
      for (int tt = 0; tt < kTilesPerConverterWarp; ++tt) {
        const float2* gp = w.params + (static_cast<int64_t>(tiles[tt]) * w.groups + g) * kTileRows;
        lo[ks][tt] = __ldg(gp + p);
        hi[ks][tt] = __ldg(gp + p + 8);
      }
    }
  }
};

__device__ __forceinline__ __nv_bfloat162 as_bf16x2(uint32_t v) { return *reinterpret_cast<const __nv_bfloat162*>(&v); }
__device__ __forceinline__ uint32_t as_word(__nv_bfloat162 v) { return *reinterpret_cast<const uint32_t*>(&v); }

// A scale as two bf16 (each in both halves of a word): s_hi = bf16(s) and s_lo = bf16(s - s_hi).
struct SplitScale {
  uint32_t hi, lo;
};
__device__ __forceinline__ SplitScale split_scale(float s) {
  const float hi = __bfloat162float(__float2bfloat16_rn(s));
  return {pack_bf16x2(hi, hi), pack_bf16x2(s - hi, s - hi)};
}
// bf16x2 v (exact small integers q - z) times s as v s_hi + bf16(v s_lo) with one rounding: the exact product is
// within 2^-17 of v s, so the bf16 is that of the fp32 product (q - z) s except where v s lies that close to a
// rounding boundary (one bf16 ulp then); with an fp16 or bf16 s every product is exact and the bf16 the same. Two
// instructions a pair instead of five.
__device__ __forceinline__ uint32_t times_split(uint32_t v, const SplitScale& s) {
  const __nv_bfloat162 x = as_bf16x2(v);
  return as_word(__hfma2(x, as_bf16x2(s.hi), __hmul2(x, as_bf16x2(s.lo))));
}

// One chunk of two tiles' codes (this lane's vectors) written to the stage's values as bf16 (q - z) s or q s - m;
// k-steps from `steps_in` on (past K) as zeros when kMasked. 4-bit codes with zero points and one group a chunk (AWQ,
// GPTQ: the common case) scale in bf16 pairs (times_split); the others in fp32, as dequantize_tiles_bf16.
template <TileCodes C, bool kOffsets, bool kOneGroup, bool kMasked>
__device__ __forceinline__ void convert_chunk(uint32_t values, const uint4 (&codes)[kTilesPerConverterWarp][Codes<C>::kVectors],
                                              const ChunkParams<kOneGroup>& cp, int warp, int lane, int steps_in) {
  using Cd = Codes<C>;
  constexpr bool kSplit = C == TileCodes::kU4 && !kOffsets && kOneGroup;
  const int p = lane / 4, t = lane % 4;
#pragma unroll
  for (int tt = 0; tt < kTilesPerConverterWarp; ++tt) {
    const auto& wv = codes[tt];
    const uint32_t row = values + ((kTilesPerConverterWarp * warp + tt) * kTileRows + p) * kRowBytes;  // tile position p; p + 8 is 8 rows on
    typename Cd::Zero zero = Cd::zero(0.0f, 0.0f);
    SplitScale s_lo{}, s_hi{};
    if constexpr (kSplit) {
      s_lo = split_scale(cp.lo[0][tt].x);
      s_hi = split_scale(cp.hi[0][tt].x);
    }
#pragma unroll
    for (int ks = 0; ks < kChunkSteps; ++ks) {
      const int pi = kOneGroup ? 0 : ks;
      const float2 l = cp.lo[pi][tt], h = cp.hi[pi][tt];
      if (!kOffsets && (ks == 0 || !kOneGroup)) zero = Cd::zero(l.y, h.y);
      uint32_t a[4];
      Cd::fragment(a, wv, ks, zero);
      uint32_t a0, a1, a2, a3;
      if constexpr (kSplit) {
        a0 = times_split(a[0], s_lo), a1 = times_split(a[1], s_hi);
        a2 = times_split(a[2], s_lo), a3 = times_split(a[3], s_hi);
      } else {
        a0 = scaled<kOffsets>(a[0], l.x, l.y), a1 = scaled<kOffsets>(a[1], h.x, h.y);
        a2 = scaled<kOffsets>(a[2], l.x, l.y), a3 = scaled<kOffsets>(a[3], h.x, h.y);
      }
      if (kMasked && ks >= steps_in) a0 = a1 = a2 = a3 = 0;
      // Columns 4t .. 4t + 3 of k-step ks: bytes 32 ks + 8 t of the row, in 16-byte piece 2 ks + t / 2 (swizzled).
      const uint32_t at = row + ((((2 * ks + t / 2) ^ p) * 16) | ((t % 2) * 8));
      asm volatile("st.shared.v2.b32 [%0], {%1, %2};" ::"r"(at), "r"(a0), "r"(a2) : "memory");
      asm volatile("st.shared.v2.b32 [%0], {%1, %2};" ::"r"(at + 8 * kRowBytes), "r"(a1), "r"(a3) : "memory");
    }
  }
}

template <TileCodes C, bool kOffsets, bool kOneGroup>
__global__ void __launch_bounds__(kThreads, 1)
    quant_gemm_ws_kernel(bf16* __restrict__ out, float* __restrict__ partial, const bf16* __restrict__ x,
                         const Tiles w, int num_tokens, int slices, const StageLayout layout) {
  using Cd = Codes<C>;
  constexpr int V = Cd::kVectors;
  extern __shared__ __align__(1024) unsigned char ring[];

  const bool converter = threadIdx.x < kConverterThreads;
  const int token0 = blockIdx.x * kBlockTokens;
  const int slice = blockIdx.z;
  const KSlice range = k_slice(w, slice, slices);
  const int chunks = range.c_end - range.c_begin;
  const uint32_t ring_base = static_cast<uint32_t>(__cvta_generic_to_shared(ring));
  const uint32_t full_bars = ring_base + layout.barriers_offset(), empty_bars = full_bars + 8 * kStages;
  auto stage = [&](int i) { return ring_base + (i % kStages) * StageLayout::stage_bytes(); };

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      barrier_init(full_bars + 8 * s, kThreads);            // the converter's values and the consumers' copies of x
      barrier_init(empty_bars + 8 * s, kConsumerThreads);  // the consumers' products
    }
  }
  __syncthreads();
  pdl_grid_sync();

  if (converter) {
    // The converter: copies its code vectors kCodeSlots - 1 chunks early into its own ring (a slot is free once this
    // thread has converted the chunk before), and writes chunk i's values once the consumers released chunk
    // i - kStages.
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    int tiles[kTilesPerConverterWarp];
#pragma unroll
    for (int tt = 0; tt < kTilesPerConverterWarp; ++tt)
      tiles[tt] = min(static_cast<int>(blockIdx.y) * 8 + kTilesPerConverterWarp * warp + tt, w.tiles - 1);
    const uint32_t codes_base = ring_base + layout.codes_offset();
    auto issue_codes = [&](int i) {
      if (i >= chunks) return;
      const int c = range.c_begin + i;
      const uint32_t slot = codes_base + (i % kCodeSlots) * layout.code_slot_bytes() + tid * 16;
#pragma unroll
      for (int tt = 0; tt < kTilesPerConverterWarp; ++tt) {
#pragma unroll
        for (int v = 0; v < V; ++v)
          copy_weights_async16_to(slot + (tt * V + v) * kConverterThreads * 16,
                                  w.codes + ((static_cast<int64_t>(tiles[tt]) * w.chunks + c) * V + v) * 32 + lane);
      }
    };
    for (int i = 0; i < kCodeSlots - 1; ++i) {
      issue_codes(i);
      copy_async_commit();
    }
    // kOneGroup: the group of the chunk whose params load next, and how many chunks of it follow that one.
    const int chunks_per_group = max(1, w.steps_per_group / kChunkSteps);
    int group = range.c_begin / chunks_per_group, group_left = chunks_per_group - range.c_begin % chunks_per_group;
    auto next_group = [&] {
      if (--group_left == 0) {
        ++group;
        group_left = chunks_per_group;
      }
    };
    // Chunk i converts with `now` while the params of chunk i + 1 load into `ahead` (two sets in turn: a load is not
    // waited for until the chunk after the one that issued it).
    auto step = [&](int i, const ChunkParams<kOneGroup>& now, ChunkParams<kOneGroup>& ahead) {
      issue_codes(i + kCodeSlots - 1);
      copy_async_commit();
      const int c = range.c_begin + i;
      if (i + 1 < chunks) {
        ahead.load(w, tiles, lane / 4, c + 1, min(group, w.groups - 1));
        next_group();
      }
      copy_async_wait<kCodeSlots - 1>();  // this thread's codes of chunk i have landed
      if (i >= kStages) barrier_wait(empty_bars + 8 * (i % kStages), (i / kStages - 1) & 1);
      uint4 codes[kTilesPerConverterWarp][V];
      const uint4* slot =
          reinterpret_cast<const uint4*>(ring + layout.codes_offset() + (i % kCodeSlots) * layout.code_slot_bytes());
#pragma unroll
      for (int tt = 0; tt < kTilesPerConverterWarp; ++tt)
#pragma unroll
        for (int v = 0; v < V; ++v) codes[tt][v] = slot[(tt * V + v) * kConverterThreads + tid];
      const uint32_t values = stage(i) + kXBytes;
      const int steps_in = range.step_end - kChunkSteps * c;
      if (steps_in >= kChunkSteps)
        convert_chunk<C, kOffsets, kOneGroup, false>(values, codes, now, warp, lane, steps_in);
      else
        convert_chunk<C, kOffsets, kOneGroup, true>(values, codes, now, warp, lane, steps_in);
      fence_proxy_async();
      barrier_arrive(full_bars + 8 * (i % kStages));
    };
    ChunkParams<kOneGroup> even, odd;
    even.load(w, tiles, lane / 4, range.c_begin, min(group, w.groups - 1));
    next_group();
    for (int i = 0; i < chunks; i += 2) {
      step(i, even, odd);
      if (i + 1 < chunks) step(i + 1, odd, even);
    }
    copy_async_wait<0>();
    return;
  }

  // A consumer: copies x kXAhead chunks early (stage i + kXAhead once chunk i - 1's products are done in both
  // consumers), then multiplies rows 64 g .. 64 g + 63 of the block (tiles 4 g .. 4 g + 3) by the 256 tokens.
  const int ctid = threadIdx.x - kConverterThreads, g = ctid / 128, warp = ctid / 32 % 4;
  const int x_piece = ctid % 8, x_token = ctid / 8;  // copy j: token x_token + 32 j, 16-byte piece x_piece of its row
  const uint32_t x_dst = x_token * kRowBytes + ((x_piece ^ (x_token % 8)) * 16);
  const bf16* x_src = x + static_cast<int64_t>(token0 + x_token) * w.k + x_piece * 8;
  const int64_t x_pass = int64_t{32} * w.k;
  const int x_tokens_left = num_tokens - token0 - x_token;  // copy j exists while 32 j < this
  auto issue_x = [&](int i) {  // zeros past T and K
    if (i >= chunks) return;
    const int c = range.c_begin + i;
    const bool cols = kTileChunkCols * c + x_piece * 8 < w.k;
    const uint32_t s = stage(i) + x_dst;
#pragma unroll
    for (int j = 0; j < kXCopies; ++j) {
      const bool copy = cols && 32 * j < x_tokens_left;
      copy_async16_zfill(s + j * 32 * kRowBytes, copy ? x_src + j * x_pass + kTileChunkCols * c : x, copy ? 16 : 0);
    }
  };
  for (int i = 0; i < kXAhead; ++i) {
    issue_x(i);
    copy_async_commit();
  }
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.0f;
  for (int i = 0; i < chunks; ++i) {
    const int slot = i % kStages;
    copy_async_wait<kXAhead - 1>();  // this thread's copies of chunk i's x have landed
    fence_proxy_async();
    barrier_arrive(full_bars + 8 * slot);
    barrier_wait(full_bars + 8 * slot, (i / kStages) & 1);
    const uint32_t s = stage(i);
    const uint64_t b = swizzled_rows_descriptor(s), a = swizzled_rows_descriptor(s + kXBytes + g * 64 * kRowBytes);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kChunkSteps; ++ks) wgmma_m64n256k16(d, a + 2 * ks, b + 2 * ks);  // 32 bytes a k-step
    wgmma_commit();
    wgmma_wait<1>();  // chunk i - 1 has been multiplied: its stage goes back, for x of chunk i + kXAhead
    if (i > 0) {
      const uint32_t released = empty_bars + 8 * ((i - 1) % kStages);
      barrier_arrive(released);
      if (i - 1 + kStages < chunks) barrier_wait(released, ((i - 1) / kStages) & 1);  // the other consumer's too
    }
    issue_x(i + kXAhead);
    copy_async_commit();
  }
  wgmma_wait<0>();
  fence_accumulators(d);
  copy_async_wait<0>();
  const int tile_index = static_cast<int>(blockIdx.y) * 8 + 4 * g + warp;
  if (tile_index >= w.tiles) return;
  store_tile_sums<kBlockTokens / 8>(out, partial, w, tile_index, token0, num_tokens, slice, slices,
                                    [&](int j, int e) { return d[4 * j + e]; });  // wgmma's fragments, as mma.sync's
}

int token_blocks(int num_tokens) { return (num_tokens + kBlockTokens - 1) / kBlockTokens; }

// How many slices of K (1 to kMaxSlices, each at least kMinChunksPerSlice chunks) take the least estimated time: the
// waves of blocks times the chunks a block walks (about a microsecond a chunk on an H100), plus the fp32 partial sums
// of more than one slice written and read back (about 3 TB/s). On Llama-3-8B's shapes at 256 tokens (one token block)
// this gives gate-up 1 slice, QKV 2, O and down 4, where the other forms' rule (fill the GPU once) gave 3, 5 and 5:
// second waves of a few blocks (docs/PERFORMANCE.md). Host values of the token blocks only, so a padded graph and its
// eager step cut alike.
int ws_slices(const Tiles& w, int blocks_of_tokens) {
  const int64_t blocks = static_cast<int64_t>(blocks_of_tokens) * ((w.tiles + 7) / 8);
  const double chunk_us = 1.0, partial_bytes_per_us = 3e6;
  int best = 1;
  double best_us = std::numeric_limits<double>::infinity();
  for (int s = 1; s <= kMaxSlices && (s == 1 || w.chunks / s >= kMinChunksPerSlice); ++s) {
    const int64_t waves = (blocks * s + sm_count() - 1) / sm_count(), chunks = (w.chunks + s - 1) / s;
    const double partial = s == 1 ? 0.0 : 8.0 * s * blocks_of_tokens * kBlockTokens * w.n / partial_bytes_per_us;
    const double us = static_cast<double>(waves * chunks) * chunk_us + partial;
    if (us < best_us) {
      best_us = us;
      best = s;
    }
  }
  return best;
}

template <TileCodes C, bool kOffsets, bool kOneGroup>
void launch(bf16* out, float* partial, const bf16* x, const Tiles& w, int num_tokens, int slices, cudaStream_t stream) {
  const StageLayout layout{Codes<C>::kVectors};
  auto* kernel = quant_gemm_ws_kernel<C, kOffsets, kOneGroup>;
  static const int configured_bytes = opt_in_shared_memory(kernel, "quant_gemm_ws");
  if (layout.block_bytes() > configured_bytes)
    throw_cuda_error(cudaErrorInvalidValue, "quant_gemm_ws: the ring does not fit in shared memory", __FILE__, __LINE__);
  const dim3 grid(static_cast<unsigned>(token_blocks(num_tokens)), static_cast<unsigned>((w.tiles + 7) / 8),
                  static_cast<unsigned>(slices));
  launch_kernel("quant_gemm_ws", kernel, grid, kThreads, static_cast<size_t>(layout.block_bytes()), stream, out, partial,
                x, w, num_tokens, slices, layout);
}

// Groups of whole chunks (4, 8, .. k-steps, or one group a row) take the form with one group's params a chunk.
template <TileCodes C, bool kOffsets>
void launch(bf16* out, float* partial, const bf16* x, const Tiles& w, int num_tokens, int slices, cudaStream_t stream) {
  if (w.steps_per_group % kChunkSteps == 0)
    launch<C, kOffsets, true>(out, partial, x, w, num_tokens, slices, stream);
  else
    launch<C, kOffsets, false>(out, partial, x, w, num_tokens, slices, stream);
}

}  // namespace

// The register form's conditions: the same tiles, rows a block (128) and alignment of x; its 128-token blocks bound
// the grid more tightly than these 256-token ones.
bool quant_gemm_ws_supported(const void* x, const QuantMatrix& w, int num_tokens) {
  return quant_gemm_wgmma_supported(x, w, num_tokens);
}

bool quant_gemm_ws_takes(const void* x, const QuantMatrix& w, int num_tokens) {
  static const int min_tokens = env_int("PAGODA_QUANT_WS_MIN_TOKENS", kQuantGemmWsMinTokens);
  static const int max_tokens = env_int("PAGODA_QUANT_WS_MAX_TOKENS", kQuantGemmWsMaxTokens);
  return min_tokens > 0 && num_tokens >= min_tokens && num_tokens <= max_tokens &&
         quant_gemm_ws_supported(x, w, num_tokens);
}

size_t quant_gemm_ws_workspace_bytes(const QuantMatrix& m, int num_tokens) {
  const int slices = ws_slices(tiles_of(m), token_blocks(num_tokens));
  return slices == 1 ? 0 : static_cast<size_t>(slices) * num_tokens * m.shape.n * sizeof(float);
}

void quant_gemm_ws(bf16* out, const bf16* x, const QuantMatrix& m, int num_tokens, void* workspace,
                   cudaStream_t stream) {
  if (num_tokens <= 0) return;
  if (!quant_gemm_ws_supported(x, m, num_tokens))
    throw_cuda_error(cudaErrorInvalidValue, "quant_gemm_ws: shape, alignment or device not supported", __FILE__,
                     __LINE__);
  const Tiles w = tiles_of(m);
  const int slices = ws_slices(w, token_blocks(num_tokens));
  auto* partial = static_cast<float*>(workspace);
  if (slices > 1 && !partial) throw_cuda_error(cudaErrorInvalidValue, "quant_gemm_ws: no workspace", __FILE__, __LINE__);
  switch (m.shape.codes) {
    case TileCodes::kU4:
      m.shape.offsets ? launch<TileCodes::kU4, true>(out, partial, x, w, num_tokens, slices, stream)
                      : launch<TileCodes::kU4, false>(out, partial, x, w, num_tokens, slices, stream);
      break;
    case TileCodes::kI8:
      m.shape.offsets ? launch<TileCodes::kI8, true>(out, partial, x, w, num_tokens, slices, stream)
                      : launch<TileCodes::kI8, false>(out, partial, x, w, num_tokens, slices, stream);
      break;
    case TileCodes::kE4M3: launch<TileCodes::kE4M3, false>(out, partial, x, w, num_tokens, slices, stream); break;
  }
  if (slices > 1) add_k_slices(out, partial, static_cast<int64_t>(num_tokens) * w.n, slices, stream);
}

}  // namespace pagoda::kernels
