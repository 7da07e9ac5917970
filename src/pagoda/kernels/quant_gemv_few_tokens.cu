// The decode GEMV of 4- and 8-bit codes at 1 to 8 tokens (quant_gemv_few_tokens.h). At batch 1 a W4 model streams
// about 0.56 bytes a weight, and on the H200 a chunk of 512 bytes reaches an SM every ~32 cycles at the HBM
// roofline: the kernel must spend few instructions per chunk and keep many bytes in flight. quant_gemv.cu's
// general kernel (any T, any code width) spends about 150 instructions a chunk (Nsight Compute,
// docs/PERFORMANCE.md); this one:
//  - x lives in shared memory, loaded once per block after the PDL wait, permuted by chunk so that a lane reads
//    its 16 activations of a chunk as two 16-byte words; the block also sums x over each segment of columns
//    (a params group of 32, 64 or 128 columns, or 128 columns when the params are per row), per token;
//  - a 4-bit code becomes bf16 as 128 + q in one LOP3 per pair (no subtraction), a signed 8-bit one as the two
//    nibbles of q + 128 in two MMAs (kCodeBias): the group's constant comes out at the segment's end, acc +=
//    s * S - m' * sum(x), with m' = s (B + z) in the zeros form and m + B s in the offsets form (quant_tiles.h;
//    B = 128 for 4-bit codes, 2304 for 8-bit). The fp32 sums then carry B x beside (q - z) x: about 2^-17 of
//    sum |x| s, far below the bf16 rounding of the output;
//  - each lane keeps the next 8 code vectors in flight in registers (a round: 8 chunks of 4-bit codes, 4 of
//    8-bit; no ring, no waits); the params of a round come a round ahead through a two-slot ring in shared
//    memory (cp.async); the first ones are issued before the PDL wait;
//  - two chains of MMA sums (even and odd k-steps; the nibbles of 8-bit codes), summed at each segment's end;
//  - the residual norm between two of these GEMVs can live in their epilogue and prologue (ResidualAdd,
//    NormedInput): the producer adds its outputs into the residual and writes each tile's sum of squares; the
//    reader's blocks sum those (every warp in one order), then stage the normalised residual as x.
// A warp owns a tile of 16 rows and a slice of K (whole segments); the warps of a block that share a tile
// add their sums in shared memory, as in quant_gemv.cu. Token p is the MMA's column p: the lanes of quads p >= NT
// (1, 2, 4 or 8: T rounded up) multiply the last token's activations too, and rows past T repeat the last token's
// (their columns are never stored), so no lane needs a zero fragment. Each token's sums come out in the same
// order whatever T is: a sequence's results do not depend on the batch it decodes in (up to 8 tokens).
// Measured on the H200 (QuantGemv.PrintsBandwidthOnLlamaShapes, Llama-3-8B's W4 g128 layer; docs/PERFORMANCE.md,
// bench/results/2026-12-04-h200-w4-few-tokens/): at one token QKV 7.17 us, O 5.53, gate-up 19.5, down 12.0 (3.4
// TB/s on gate-up), where the general kernel takes 8.46, 6.25, 28.6 and 14.5; at two tokens 7.86, 6.18, 21.1, 14.2
// (general: 10.0, 6.72, 40.0, 16.7). Nsight Compute on the one-token form's gate-up: 72 instructions a chunk. The
// loads into buf must not sit behind a branch: with one, the compiler copied the loaded registers from round to
// round, each copy waited for its load, and gate-up took 28 us. Tried and slower: bulk L2 prefetches of the rounds
// ahead (gate-up 22.9 us one round ahead, 23.1 two), blocks of 4 warps.
#include "pagoda/kernels/quant_gemv_few_tokens.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/gemm_epilogue.cuh"
#include "pagoda/kernels/launch.cuh"
#include "pagoda/kernels/quant_codes.cuh"
#include "pagoda/kernels/weight_loads.cuh"

namespace pagoda::kernels {
namespace {

constexpr int kWarps = 8;                // per block (K cut in up to 8 slices; blocks of 4 warps: slower)
constexpr int kWarpsPerSm = 16;          // __launch_bounds__: 2 blocks
constexpr int kMinChunksPerSlice = 8;    // a K slice is at least this many chunks (512 columns)

constexpr int kVectorsInFlight = 8;      // 16-byte code vectors in flight per lane (32 registers)

// Chunks of a round (the code vectors in flight): 8 of 4-bit codes, 4 of 8-bit.
__host__ __device__ constexpr int round_chunks(TileCodes c) { return kVectorsInFlight / tile_vectors_per_chunk(c); }

// Segments of a round, whose params share a slot of the ring.
__host__ __device__ constexpr int round_segments(TileCodes c, int seg_steps) { return round_chunks(c) * 4 / seg_steps; }

// What the MMAs sum for a code q, as bf16 (exact small integers), and the constant taken out at a segment's end:
// 4-bit codes as 128 + q (one LOP3 a pair), so sum(q x) = S - 128 sum(x); signed 8-bit codes as their unsigned
// u = q + 128 split in nibbles, 128 + (u >> 4) and 128 + (u & 15) in two MMAs (a PRMT, a shift and two LOP3s a
// pair: the sign flip of u is an XOR of the high nibble's top bit inside the LOP3), so sum(q x) = 16 S_hi + S_lo
// - 2304 sum(x).
template <TileCodes C>
constexpr float kCodeBias = C == TileCodes::kU4 ? 128.0f : 2304.0f;

// Shared memory of a block: x [NT][K] bf16 permuted by chunk, each warp's params ring [warps][2 slots][round
// segments][16] float2, the slices' sums [warps][4][32] fp32, then the segment sums [NT][K / (16 seg_steps)] fp32.
size_t shared_bytes(TileCodes c, int64_t k, int seg_steps, int nt) {
  const int64_t segments = k / (16 * seg_steps);
  return static_cast<size_t>(nt) * k * 2 + static_cast<size_t>(kWarps) * 2 * round_segments(c, seg_steps) * kTileRows * 8 +
         static_cast<size_t>(kWarps) * 4 * 32 * 4 + static_cast<size_t>(nt) * segments * 4;
}

// Tokens a launch is built for: T rounded up to 1, 2, 4 or 8.
int token_slots(int num_tokens) { return num_tokens <= 2 ? num_tokens : num_tokens <= 4 ? 4 : 8; }

// A k-step's 8 signed 8-bit codes (words lo, hi of rows p, p + 8: quant_tiles.h's register order) as the bf16
// nibbles of u = q + 128: 128 + (u & 15) into a_lo, 128 + (u >> 4) into a_hi.
__device__ __forceinline__ void fragment_nibbles(uint32_t (&a_lo)[4], uint32_t (&a_hi)[4], uint32_t lo, uint32_t hi) {
  const uint32_t pairs[4] = {__byte_perm(lo, 0u, 0x4140u), __byte_perm(hi, 0u, 0x4140u), __byte_perm(lo, 0u, 0x4342u),
                             __byte_perm(hi, 0u, 0x4342u)};  // bytes 0, 1 (columns 2t, 2t + 1) and 2, 3 (+ 8)
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    a_lo[i] = and_or(pairs[i], 0x000f000fu, 0x43004300u);
    a_hi[i] = and_xor(pairs[i] >> 4, 0x000f000fu, 0x43084308u);  // q's top bit flipped: u's high nibble
  }
}

// Eight bf16 residual values (r) normalised with inv and scaled by gamma (g), as add_rms_norm rounds them:
// bf16(bf16(r inv) g) (elementwise.cu: normalised8).
__device__ __forceinline__ uint32_t normed_pair(uint32_t r, uint32_t g, float inv) {
  const __nv_bfloat162 a = __floats2bfloat162_rn(__uint_as_float(r << 16) * inv, __uint_as_float(r & 0xffff0000u) * inv);
  const __nv_bfloat162 o = __floats2bfloat162_rn(__low2float(a) * __uint_as_float(g << 16),
                                                 __high2float(a) * __uint_as_float(g & 0xffff0000u));
  return *reinterpret_cast<const uint32_t*>(&o);
}
__device__ __forceinline__ uint4 normed_vector(uint4 r, uint4 g, float inv) {
  return make_uint4(normed_pair(r.x, g.x, inv), normed_pair(r.y, g.y, inv), normed_pair(r.z, g.z, inv),
                    normed_pair(r.w, g.w, inv));
}

// SEG: k-steps (16 columns) per segment, 2, 4 or 8; NT: token slots (1, 2, 4 or 8 >= T). param_stride: float2s
// from one segment's params to the next (16: a group per segment; 0: per row). Block: warps / splits tiles, each
// cut into `splits` slices. normed.residual, add.residual: the norm between two GEMVs (quant_gemv_few_tokens.h).
template <TileCodes C, int SEG, int NT, Epilogue E>
__global__ void __launch_bounds__(kWarps * 32, kWarpsPerSm / kWarps)
    few_tokens_kernel(bf16* __restrict__ out, const bf16* __restrict__ x, const Tiles w, int num_tokens, int splits,
                      int segments, int param_stride, const QkvRopeOutput rope, const NormedInput normed,
                      const ResidualAdd add) {
  constexpr int kSegChunks = SEG >= 4 ? SEG / 4 : 1;  // chunks a segment spans
  constexpr int kChunkSegs = SEG == 2 ? 2 : 1;        // segments a chunk holds
  constexpr int V = tile_vectors_per_chunk(C);        // code vectors a chunk
  constexpr int kDepth = round_chunks(C);             // chunks of a round
  constexpr int G = round_segments(C, SEG);           // segments of a round
  constexpr int kPieces = G * kTileRows * 8 / 16;     // 16-byte pieces of a round's params
  extern __shared__ __align__(16) unsigned char shared[];
  constexpr int warps = kWarps;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  bf16* xs = reinterpret_cast<bf16*>(shared);
  unsigned char* after_x = shared + static_cast<size_t>(NT) * w.k * 2;
  float2* ring = reinterpret_cast<float2*>(after_x) + warp * 2 * G * kTileRows;
  float* partials = reinterpret_cast<float*>(after_x) + warps * 2 * G * kTileRows * 2;
  float* seg_sums = partials + warps * 4 * 32;  // [NT][segments]

  const int p = lane / 4, t = lane % 4;  // fragment row and column group
  const int slice = warp % splits;
  const int tile_index = static_cast<int>(blockIdx.x) * (warps / splits) + warp / splits;
  const int tile = min(tile_index, w.tiles - 1);  // past the last tile: recompute it, store nothing
  const int units = w.chunks / kSegChunks;
  const int c_begin = static_cast<int>(static_cast<int64_t>(units) * slice / splits) * kSegChunks;
  const int c_end = static_cast<int>(static_cast<int64_t>(units) * (slice + 1) / splits) * kSegChunks;
  const int seg_begin = c_begin * kChunkSegs / kSegChunks, seg_end = c_end * kChunkSegs / kSegChunks;
  const uint4* codes = w.codes + static_cast<int64_t>(tile) * w.chunks * V * 32 + lane;  // chunk c, vector v: (c V + v) 32
  const float2* params = w.params + static_cast<int64_t>(tile) * w.groups * kTileRows;

  // The params of the round from segment `first` into ring slot `slot`: piece i is positions 2(i % 8), 2(i % 8)
  // + 1 of segment first + i / 8 (nothing past the slice). One cp.async group a round.
  auto issue_params = [&](int first, int slot) {
#pragma unroll
    for (int i = lane; i < kPieces; i += 32) {
      const int seg = first + i / 8;
      if (seg < seg_end)
        copy_weights_async16(ring + (slot * G + i / 8) * kTileRows + 2 * (i % 8),
                             params + static_cast<int64_t>(seg) * param_stride + 2 * (i % 8));
    }
    copy_async_commit();
  };
  // The code vectors of chunk `chunk` (past the slice: its last chunk again, never used) into buf[i V ..].
  uint4 buf[kVectorsInFlight];
  auto load_chunk = [&](int i, int chunk) {
#pragma unroll
    for (int v = 0; v < V; ++v)
      buf[i * V + v] = load_weights(codes + (static_cast<int64_t>(min(chunk, c_end - 1)) * V + v) * 32);
  };
  // Weights only before the PDL wait: the first round's codes (registers) and params (ring slot 0).
#pragma unroll
  for (int i = 0; i < kDepth; ++i) load_chunk(i, c_begin + i);
  issue_params(seg_begin, 0);
  pdl_grid_sync();

  // With a normed input, each token's 1 / rms of the residual, from the producer's tile sums: summed by every warp
  // in the same order (lane i the tiles i, i + 32, ..., then a tree to lane 0), so every block stages the same x.
  float inv_rms[NT];
  const bool normed_in = normed.residual != nullptr;  // uniform
  if (normed_in) {
#pragma unroll
    for (int k = 0; k < NT; ++k) {
      const float* squares = normed.tile_squares + static_cast<int64_t>(min(k, num_tokens - 1)) * normed.count;
      float sum = 0.0f;
      for (int i = lane; i < normed.count; i += 32) sum += squares[i];
#pragma unroll
      for (int offset = 16; offset >= 1; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
      inv_rms[k] = rsqrtf(__shfl_sync(0xffffffffu, sum, 0) / static_cast<float>(w.k) + normed.eps);
    }
  }

  // x into shared memory, permuted by chunk so that lane t's columns of a chunk are contiguous: columns 16 s +
  // 4 t .. + 3 of k-step s go to x_s[64 c + 16 t + 4 s] of the token's row. Token slots past T take the last
  // token's row. Lane l of a warp reads 8 columns (16 bytes), a warp 256 (within one row: a row is a multiple of
  // a segment), and kBatch reads are in flight before any is used (each is an L2 round trip); the 2 SEG lanes of
  // a segment then sum it. With a normed input, the residual's vectors are read instead and normalised as staged.
  constexpr int kBatch = 4;
  const bf16* source = normed_in ? normed.residual : x;
  const int row_vectors = w.k / 8, vectors = NT * row_vectors;
  for (int base = warp * 32; base < vectors; base += warps * 32 * kBatch) {  // warp-uniform (the shuffles)
    const int v0 = base + lane;
    uint4 xv[kBatch], gv[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int v = v0 + b * warps * 32, token = v / row_vectors;
      xv[b] = v < vectors ? __ldg(reinterpret_cast<const uint4*>(source + static_cast<int64_t>(min(token, num_tokens - 1)) * w.k) +
                                  (v - token * row_vectors))
                          : uint4{};
      if (normed_in)
        gv[b] = v < vectors ? __ldg(reinterpret_cast<const uint4*>(normed.gamma) + (v - token * row_vectors)) : uint4{};
    }
    if (normed_in) {
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int token = (v0 + b * warps * 32) / row_vectors;
        float inv = inv_rms[0];
#pragma unroll
        for (int k = 1; k < NT; ++k) inv = token == k ? inv_rms[k] : inv;  // (no indexed register array)
        xv[b] = normed_vector(xv[b], gv[b], inv);
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int v = v0 + b * warps * 32, token = v / row_vectors, u = v - token * row_vectors;
      if (v < vectors) {  // chunk u / 8, k-step (u % 8) / 2, column groups 2 (u % 2) and 2 (u % 2) + 1
        bf16* dst = xs + static_cast<int64_t>(token) * w.k + 64 * (u / 8) + 4 * ((u % 8) / 2) + 32 * (u % 2);
        *reinterpret_cast<uint2*>(dst) = make_uint2(xv[b].x, xv[b].y);
        *reinterpret_cast<uint2*>(dst + 16) = make_uint2(xv[b].z, xv[b].w);
      }
      float f = sum4(make_uint2(xv[b].x, xv[b].y)) + sum4(make_uint2(xv[b].z, xv[b].w));
#pragma unroll
      for (int offset = 1; offset < 2 * SEG; offset *= 2) f += __shfl_xor_sync(0xffffffffu, f, offset);
      if (v < vectors && lane % (2 * SEG) == 0) seg_sums[token * segments + u / (2 * SEG)] = f;
    }
  }
  __syncthreads();

  const bool offsets = w.offsets;
  // The MMA fragment's outputs: rows p (0, 1) and p + 8 (2, 3) for tokens 2t (0, 2) and 2t + 1 (1, 3).
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const float* xsum0 = seg_sums + min(2 * t, NT - 1) * segments;  // the lane's tokens' segment sums
  const float* xsum1 = seg_sums + min(2 * t + 1, NT - 1) * segments;
  float part[2][4];  // two chains of sums: even and odd k-steps (4-bit); low and high nibbles (8-bit)
#pragma unroll
  for (int s = 0; s < 2; ++s) part[s][0] = part[s][1] = part[s][2] = part[s][3] = 0.0f;
  int seg = seg_begin;
  const float2* slot_params = ring;  // the current round's slot
  // A segment ends: its sums are scaled into the accumulators with the params of the round's segment j.
  auto end_segment = [&](int j) {
    float sum[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      sum[r] = C == TileCodes::kU4 ? part[0][r] + part[1][r] : fmaf(16.0f, part[1][r], part[0][r]);
      part[0][r] = part[1][r] = 0.0f;
    }
    constexpr float kBias = kCodeBias<C>;
    const float2 lo = slot_params[j * kTileRows + p], hi = slot_params[j * kTileRows + p + 8];
    const float m_lo = offsets ? fmaf(kBias, lo.x, lo.y) : lo.x * (kBias + lo.y);
    const float m_hi = offsets ? fmaf(kBias, hi.x, hi.y) : hi.x * (kBias + hi.y);
    const float x0 = xsum0[seg];
    acc[0] += fmaf(lo.x, sum[0], -m_lo * x0);
    acc[2] += fmaf(hi.x, sum[2], -m_hi * x0);
    if constexpr (NT > 1) {
      const float x1 = xsum1[seg];
      acc[1] += fmaf(lo.x, sum[1], -m_lo * x1);
      acc[3] += fmaf(hi.x, sum[3], -m_hi * x1);
    }
    ++seg;
  };

  const bf16* x_lane = xs + static_cast<int64_t>(min(p, NT - 1)) * w.k + 16 * t;  // token p's row (MMA column p)
  // A round: the next round's params are asked for, and this round's must have landed.
  auto begin_round = [&](int c, int slot) {
    issue_params(seg + G, slot ^ 1);
    copy_async_wait<1>();  // this round's params have landed (this lane's copies) ...
    __syncwarp();          // ... and every lane's; all are done with the slot of the round before
    slot_params = ring + slot * G * kTileRows;
  };
  // Chunk `chunk`, the round's i-th: its codes (V vectors from v) times x, and the segments that end in it.
  auto multiply_chunk = [&](const uint4* v, int chunk, int i) {
    const uint4* xc = reinterpret_cast<const uint4*>(x_lane + 64 * chunk);
    const uint4 x01 = xc[0], x23 = xc[1];
    const uint32_t xb[4][2] = {{x01.x, x01.y}, {x01.z, x01.w}, {x23.x, x23.y}, {x23.z, x23.w}};
#pragma unroll
    for (int s = 0; s < 4; ++s) {  // k-steps
      if constexpr (C == TileCodes::kU4) {
        uint32_t a[4];
        u4_as_bf16_128(a, word_of(v[0], s));
        mma_bf16(part[s % 2], a, xb[s][0], xb[s][1]);
      } else {
        uint32_t a_lo[4], a_hi[4];
        fragment_nibbles(a_lo, a_hi, word_of(v[s / 2], (s % 2) * 2), word_of(v[s / 2], (s % 2) * 2 + 1));
        mma_bf16(part[0], a_lo, xb[s][0], xb[s][1]);
        mma_bf16(part[1], a_hi, xb[s][0], xb[s][1]);
      }
      if constexpr (SEG == 2) {
        if (s % 2 == 1) end_segment(2 * i + s / 2);
      }
    }
    if constexpr (SEG != 2) {
      if ((i + 1) % kSegChunks == 0) end_segment(i / kSegChunks);
    }
  };
  int c = c_begin, slot = 0;
  for (; c + kDepth <= c_end; c += kDepth, slot ^= 1) {  // whole rounds; warp-uniform
    begin_round(c, slot);
#pragma unroll
    for (int i = 0; i < kDepth; ++i) {
      uint4 v[V];
#pragma unroll
      for (int j = 0; j < V; ++j) v[j] = buf[i * V + j];
      // The chunk a round ahead, or the slice's last again: no branch around the load, so that buf keeps its
      // registers from round to round.
      load_chunk(i, c + i + kDepth);
      multiply_chunk(v, c + i, i);
    }
    __syncwarp();  // every lane is done with this slot before the next round's copies into it
  }
  if (c < c_end) {  // a last, partial round (whole segments): its codes are in buf
    begin_round(c, slot);
#pragma unroll
    for (int i = 0; i < kDepth; ++i) {
      if (c + i >= c_end) break;  // warp-uniform
      multiply_chunk(buf + i * V, c + i, i);
    }
  }
  copy_async_wait<0>();

  constexpr int kOutputs = NT > 1 ? 4 : 2;  // acc[1], acc[3] hold tokens 2t + 1: none at one token
  auto output = [](int i) { return kOutputs == 4 ? i : 2 * i; };
  if (splits > 1) {  // uniform over the block: slice 0 adds the others' sums, in slice order
#pragma unroll
    for (int i = 0; i < kOutputs; ++i) partials[(warp * 4 + i) * 32 + lane] = acc[output(i)];
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int i = 0; i < kOutputs; ++i) {
      float sum = 0.0f;
      for (int sl = 0; sl < splits; ++sl) sum += partials[((warp + sl) * 4 + i) * 32 + lane];
      acc[output(i)] = sum;
    }
  }
  if (tile_index >= w.tiles) return;
  // Lane (p, t) holds rows 2p and 2p + 1 of the tile (positions p, p + 8) for tokens 2t and 2t + 1.
  const int row = tile * kTileRows + 2 * p;
  if (add.residual != nullptr) {  // (kPlain) r = bf16(r + bf16(product)), then the tile's sum of r^2 per token
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int token = 2 * t + j;
      float squares = 0.0f;
      if (token < num_tokens) {
        bf16* r = add.residual + static_cast<int64_t>(token) * w.n + row;
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          if (row + i >= w.n) continue;
          // (the residual read here, not before the loop: held across it, its registers made the kernel spill)
          const bf16 sum = __float2bfloat16(__bfloat162float(r[i]) + __bfloat162float(__float2bfloat16(acc[2 * i + j])));
          r[i] = sum;
          squares += __bfloat162float(sum) * __bfloat162float(sum);
        }
      }
#pragma unroll
      for (int offset = 16; offset >= 4; offset /= 2) squares += __shfl_down_sync(0xffffffffu, squares, offset);
      if (p == 0 && token < num_tokens) add.tile_squares[static_cast<int64_t>(token) * w.tiles + tile] = squares;
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int token = 2 * t + j;
    if (token >= num_tokens) continue;
    if constexpr (E == Epilogue::kPlain) {
      store_rows<E>(out, rope, w.n, token, row, acc[j], 0.0f);
      store_rows<E>(out, rope, w.n, token, row + 1, acc[2 + j], 0.0f);
    } else {
      store_rows<E>(out, rope, w.n, token, row, acc[j], acc[2 + j]);
    }
  }
}

// k-steps per segment for this matrix (0: the kernel does not take it).
int segment_steps(const QuantTilesShape& s) {
  if (s.codes == TileCodes::kE4M3 || s.k <= 0 || s.k % kTileChunkCols != 0) return 0;
  if (s.group_size >= s.k) return s.k % 128 == 0 ? 8 : 4;  // per row: any segment
  if (s.group_size == 32 || s.group_size == 64 || s.group_size == 128) return static_cast<int>(s.group_size / 16);
  return 0;
}

// The shared memory a block may have so that two fit an SM (kWarpsPerSm / kWarps: fewer would halve the loads in
// flight), as the device reports it.
size_t block_shared_limit() {
  static const size_t bytes = [] {
    int device = 0, per_sm = 0, reserved = 0, optin = 0;
    const char* what = "quant_gemv_few_tokens";
    cuda_check(cudaGetDevice(&device), what, __FILE__, __LINE__);
    cuda_check(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device), what, __FILE__, __LINE__);
    cuda_check(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device), what, __FILE__, __LINE__);
    cuda_check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), what, __FILE__, __LINE__);
    const int blocks = kWarpsPerSm / kWarps;
    return static_cast<size_t>(std::min(optin, per_sm / blocks - reserved));
  }();
  return bytes;
}

template <TileCodes C, int SEG, int NT, Epilogue E>
void launch(bf16* out, const QkvRopeOutput& rope, const bf16* x, const QuantMatrix& m, int num_tokens,
            cudaStream_t stream, const NormedInput& normed, const ResidualAdd& add) {
  auto* kernel = few_tokens_kernel<C, SEG, NT, E>;
  constexpr int kSegChunks = SEG >= 4 ? SEG / 4 : 1;
  static const bool configured = [kernel] {  // the shared memory two blocks may have, and little L1 (x is shared)
    cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(block_shared_limit())),
               "quant_gemv_few_tokens", __FILE__, __LINE__);
    cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared),
               "quant_gemv_few_tokens", __FILE__, __LINE__);
    return true;
  }();
  (void)configured;
  const Tiles w = tiles_of(m);
  const int segments = w.k / (16 * SEG);
  const int splits = one_wave_splits(w.tiles, w.chunks / kSegChunks, kWarps, kWarpsPerSm / kWarps,
                                     kMinChunksPerSlice / kSegChunks);
  const int64_t tiles_per_block = kWarps / splits;
  const int64_t blocks = (w.tiles + tiles_per_block - 1) / tiles_per_block;
  const int param_stride = m.shape.group_size >= m.shape.k ? 0 : kTileRows;
  launch_kernel("quant_gemv_few_tokens", kernel, static_cast<unsigned>(blocks), kWarps * 32,
                shared_bytes(C, w.k, SEG, NT), stream, out, x, w, num_tokens, splits, segments, param_stride,
                rope, normed, add);
}

// The norm's two sides as the kernel takes them (quant_gemv_few_tokens.h).
struct NormSides {
  NormedInput normed;
  ResidualAdd add;
};

template <TileCodes C, int SEG, Epilogue E>
void dispatch_tokens(bf16* out, const QkvRopeOutput& rope, const bf16* x, const QuantMatrix& m, int num_tokens,
                     cudaStream_t stream, const NormSides& n) {
  switch (token_slots(num_tokens)) {
    case 1: return launch<C, SEG, 1, E>(out, rope, x, m, num_tokens, stream, n.normed, n.add);
    case 2: return launch<C, SEG, 2, E>(out, rope, x, m, num_tokens, stream, n.normed, n.add);
    case 4: return launch<C, SEG, 4, E>(out, rope, x, m, num_tokens, stream, n.normed, n.add);
    default: return launch<C, SEG, 8, E>(out, rope, x, m, num_tokens, stream, n.normed, n.add);
  }
}

template <TileCodes C, Epilogue E>
void dispatch_segments(bf16* out, const QkvRopeOutput& rope, const bf16* x, const QuantMatrix& m, int num_tokens,
                       cudaStream_t stream, const NormSides& n) {
  switch (segment_steps(m.shape)) {
    case 2: return dispatch_tokens<C, 2, E>(out, rope, x, m, num_tokens, stream, n);
    case 4: return dispatch_tokens<C, 4, E>(out, rope, x, m, num_tokens, stream, n);
    case 8: return dispatch_tokens<C, 8, E>(out, rope, x, m, num_tokens, stream, n);
    default: throw_cuda_error(cudaErrorInvalidValue, "quant_gemv_few_tokens: shape not supported", __FILE__, __LINE__);
  }
}

template <Epilogue E>
void dispatch(bf16* out, const QkvRopeOutput& rope, const bf16* x, const QuantMatrix& m, int num_tokens,
              cudaStream_t stream, const NormSides& n) {
  if (m.shape.codes == TileCodes::kU4) return dispatch_segments<TileCodes::kU4, E>(out, rope, x, m, num_tokens, stream, n);
  return dispatch_segments<TileCodes::kI8, E>(out, rope, x, m, num_tokens, stream, n);
}

}  // namespace

bool quant_gemv_few_tokens_takes(const void* x, const QuantMatrix& w, int num_tokens) {
  static const bool enabled = env_flag("PAGODA_QUANT_FEW_TOKENS", true);
  const int steps = segment_steps(w.shape);
  return enabled && num_tokens >= 1 && num_tokens <= kQuantGemvFewTokensMax && steps > 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0 && w.codes && w.params && w.shape.tiles() < (int64_t{1} << 31) &&
         shared_bytes(w.shape.codes, w.shape.k, steps, token_slots(num_tokens)) <= block_shared_limit();
}

void quant_gemv_few_tokens(Epilogue epilogue, bf16* out, const QkvRopeOutput& rope, const bf16* x, const QuantMatrix& w,
                           int num_tokens, cudaStream_t stream, const NormedInput& normed, const ResidualAdd& add) {
  if (add.residual != nullptr && (epilogue != Epilogue::kPlain || add.tile_squares == nullptr))
    throw_cuda_error(cudaErrorInvalidValue, "quant_gemv_few_tokens: a residual add needs the plain epilogue and tile sums",
                     __FILE__, __LINE__);
  if (normed.residual != nullptr &&
      (normed.tile_squares == nullptr || normed.gamma == nullptr || normed.count <= 0 ||
       reinterpret_cast<uintptr_t>(normed.residual) % 16 != 0 || reinterpret_cast<uintptr_t>(normed.gamma) % 16 != 0))
    throw_cuda_error(cudaErrorInvalidValue, "quant_gemv_few_tokens: a normed input needs its tile sums, count and 16-byte "
                     "aligned residual and gamma", __FILE__, __LINE__);
  const NormSides n{normed, add};
  switch (epilogue) {
    case Epilogue::kPlain: return dispatch<Epilogue::kPlain>(out, rope, x, w, num_tokens, stream, n);
    case Epilogue::kSilu: return dispatch<Epilogue::kSilu>(out, rope, x, w, num_tokens, stream, n);
    case Epilogue::kRope: return dispatch<Epilogue::kRope>(out, rope, x, w, num_tokens, stream, n);
  }
}

}  // namespace pagoda::kernels
