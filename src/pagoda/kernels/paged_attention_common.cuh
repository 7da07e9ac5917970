// What the paged attention kernels share (contract: paged_attention.h): constants, PTX wrappers (sm_80+),
// the tensor-core tile helpers of the prefill and decode kernels, and the host-side checks and device
// limits of their launchers. Keys and values are gathered from the block KV cache [num_blocks,
// block_size, num_kv_heads, head_dim] through each sequence's block table. Scores are kept in the log2
// domain (scaled by softmax_scale * log2(e)) so that exp2f does the softmax. q, out and the caches must be
// 16-byte aligned (cudaMalloc'd buffers are) for the 64/128 paths.
//   paged_attention_prefill.cu  tensor-core prefill (head_dim 64, 128)
//   paged_attention_decode.cu   tensor-core split-K decode and the merge of its spans (head_dim 64, 128)
//   paged_attention_generic.cu  every other head_dim, prefill and decode
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

#include "pagoda/core/env_knob.h"
#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/launch.cuh"
#include "pagoda/kernels/paged_attention.h"

namespace pagoda::kernels::attention {

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
// FP8 KV stages are about half as large, so more of them keep as many bytes in flight: 8 deep; 5 wide where
// two blocks of that still fit an SM (sm_90's 228 KB), 3 otherwise.
constexpr int kDecodeStagesDeepFp8 = 8;
constexpr int kDecodeStagesWideFp8 = 5;
constexpr int kDecodeStagesWideFp8Small = 3;
constexpr int kDecodeStagesManyFp8 = 2;  // four blocks an SM, when the grid is more than two waves of two

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

// The same with f16 operands.
__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
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

// A key's block (index into its sequence's page list) and offset in it: shifts for the usual power-of-two
// block sizes, a division otherwise.
struct BlockIndex {
  int size, shift;  // shift < 0: not a power of two
  __device__ __forceinline__ explicit BlockIndex(int block_size) : size(block_size), shift(-1) {
#ifdef __CUDA_ARCH__  // (the host pass sees this body too, without the intrinsic)
    if ((block_size & (block_size - 1)) == 0) shift = __ffs(block_size) - 1;
#endif
  }
  __device__ __forceinline__ int block(int key) const { return shift >= 0 ? key >> shift : key / size; }
  __device__ __forceinline__ int offset(int key) const { return shift >= 0 ? key & (size - 1) : key % size; }
};

// Gathers rows [key0, key0 + kTileK) of one KV head, kRowBytes each, from the K and V caches (rows
// [slots, nkv] of kRowBytes) into ks/vs (rows of kLdBytes) with cp.async, 16 bytes a copy. Keys at or past
// key_end are zero-filled and never read from memory (nor their block ids). The bf16 and FP8 tiles share it.
template <int kRowBytes, int kLdBytes>
__device__ __forceinline__ void gather_kv_rows(unsigned char* ks, unsigned char* vs, const void* k_cache,
                                               const void* v_cache, const PagedAttentionParams& p,
                                               const int32_t* pages, int kvh, int key0, int key_end) {
  constexpr int kChunks = kRowBytes / 16;
  static_assert(kThreads % kChunks == 0, "whole rows per pass");
  constexpr int kRowsPerPass = kThreads / kChunks;
  const int c = threadIdx.x % kChunks;
  const BlockIndex blocks(p.block_size);
#pragma unroll
  for (int i = 0; i < kTileK / kRowsPerPass; ++i) {
    const int r = threadIdx.x / kChunks + i * kRowsPerPass;
    unsigned char* kd = ks + r * kLdBytes + c * 16;
    unsigned char* vd = vs + r * kLdBytes + c * 16;
    const int key = key0 + r;
    if (key < key_end) {
      const int64_t slot = static_cast<int64_t>(pages[blocks.block(key)]) * p.block_size + blocks.offset(key);
      const int64_t offset = (slot * p.num_kv_heads + kvh) * kRowBytes + c * 16;
      cp_async16(kd, static_cast<const unsigned char*>(k_cache) + offset);
      cp_async16(vd, static_cast<const unsigned char*>(v_cache) + offset);
    } else {
      *reinterpret_cast<uint4*>(kd) = make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4*>(vd) = make_uint4(0, 0, 0, 0);
    }
  }
}

// The bf16 tile of rows [key0, key0 + kTileK) into ks/vs ([kTileK][tile_ld<D>] bf16).
template <int D>
__device__ __forceinline__ void load_kv_tile(bf16* ks, bf16* vs, const PagedAttentionParams& p,
                                             const int32_t* pages, int kvh, int key0, int key_end) {
  gather_kv_rows<D * 2, tile_ld<D>() * 2>(reinterpret_cast<unsigned char*>(ks), reinterpret_cast<unsigned char*>(vs),
                                          p.k_cache, p.v_cache, p, pages, kvh, key0, key_end);
}

// ---------------------------------------------------------------------------------------------------
// FP8 KV (paged_attention.h). A stage holds the codes of kTileK keys of one KV head, rows of D bytes
// padded by 16, then each key's exponent: K codes, V codes, K exponents, V exponents. The compute reads
// bf16 tiles as over a bf16 cache: dequantize_kv_rows fills them, and the scales come in outside the MMAs
// (kFp8TileShift below).

template <int D>
constexpr int fp8_tile_ld() {
  return D + 16;
}
template <int D>
constexpr size_t fp8_stage_bytes() {
  return 2 * (static_cast<size_t>(kTileK) * fp8_tile_ld<D>() + kTileK);
}
struct Fp8Stage {
  uint8_t* k;
  uint8_t* v;
  int8_t* k_exp;
  int8_t* v_exp;
};
template <int D>
__device__ __forceinline__ Fp8Stage fp8_stage(unsigned char* base) {
  uint8_t* k = base;
  uint8_t* v = k + kTileK * fp8_tile_ld<D>();
  int8_t* k_exp = reinterpret_cast<int8_t*>(v + kTileK * fp8_tile_ld<D>());
  return {k, v, k_exp, k_exp + kTileK};
}

__device__ __forceinline__ void cp_async4(void* smem_dst, const void* gmem_src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_u32(smem_dst)), "l"(gmem_src) : "memory");
}

// load_kv_tile for an FP8 cache: the codes of rows [key0, key0 + kTileK) (zero past key_end) and their
// exponents. Exponents sit block by block, head by head ([num_blocks, nkv, block_size]), so with block
// sizes divisible by 4 (key0 always is) four keys' exponents are one 4-byte copy; other block sizes load
// them one by one.
template <int D>
__device__ __forceinline__ void load_kv_tile_fp8(const Fp8Stage& st, const PagedAttentionParams& p,
                                                 const int32_t* pages, int kvh, int key0, int key_end) {
  gather_kv_rows<D, fp8_tile_ld<D>()>(st.k, st.v, p.k_fp8, p.v_fp8, p, pages, kvh, key0, key_end);
  const BlockIndex blocks(p.block_size);
  const auto exp_src = [&](const int8_t* exps, int key) {
    return exps + (static_cast<int64_t>(pages[blocks.block(key)]) * p.num_kv_heads + kvh) * p.block_size +
           blocks.offset(key);
  };
  if (p.block_size % 4 == 0) {
    static_assert(2 * kTileK / 4 <= kThreads, "one thread per four exponents");
    if (threadIdx.x < 2 * kTileK / 4) {
      const bool is_v = threadIdx.x >= kTileK / 4;
      const int r = 4 * (threadIdx.x % (kTileK / 4));
      int8_t* dst = (is_v ? st.v_exp : st.k_exp) + r;
      if (key0 + r < key_end) {  // keys r..r+3 share a block; those past key_end have zero codes
        cp_async4(dst, exp_src(is_v ? p.v_exp : p.k_exp, key0 + r));
      } else {
        *reinterpret_cast<int32_t*>(dst) = 0;
      }
    }
  } else if (threadIdx.x < 2 * kTileK) {
    const bool is_v = threadIdx.x >= kTileK;
    const int r = threadIdx.x % kTileK;
    (is_v ? st.v_exp : st.k_exp)[r] = key0 + r < key_end ? *exp_src(is_v ? p.v_exp : p.k_exp, key0 + r) : 0;
  }
}

// 2^e as a float, e in [-126, 127].
__device__ __forceinline__ float exp2_int(int e) { return __int_as_float((e + 127) << 23); }

// The FP8 tiles hold each code's value times 2^-kFp8TileShift (exact, and a normal bf16 for every nonzero
// code). The row scales are applied outside the MMAs, which keeps the conversion to a few integer ops:
//   scores: (q . k_tile) * softmax_scale * 2^(e_k + kFp8TileShift)
//   values: P * 2^e_v times v_tile, the accumulator times 2^kFp8TileShift at the end.
// Each factor is a power of two, so the results equal the bf16 kernel's over the values code * 2^e, bit
// for bit (kv/kv_fp8.h keeps e in [-126, 63], so every factor is a normal float).
constexpr int kFp8TileShift = 56;

// Four e4m3 codes (one word) as two bf16 pairs of value * 2^-120: sign to bit 15, exponent and mantissa
// to bits 10..4 of each half (bf16's exponent field then holds e4m3's, biased by 127 instead of 7).
// Subnormal codes map to bf16 subnormals, zero to zero; multiplying by 2^64 (exact) makes them normal.
__device__ __forceinline__ void e4m3x4_to_bf16x4(uint32_t w, uint32_t& lo, uint32_t& hi) {
  const uint32_t high = (w & 0x80808080u) | ((w >> 4) & 0x07070707u);  // s000 0EEE: each bf16's high byte
  const uint32_t low = (w << 4) & 0xF0F0F0F0u;                         // EMMM 0000: its low byte
  const __nv_bfloat162 two64 = __floats2bfloat162_rn(0x1p64f, 0x1p64f);
  const uint32_t l = __byte_perm(low, high, 0x5140), h = __byte_perm(low, high, 0x7362);
  const __nv_bfloat162 a = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&l), two64);
  const __nv_bfloat162 b = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&h), two64);
  lo = *reinterpret_cast<const uint32_t*>(&a);
  hi = *reinterpret_cast<const uint32_t*>(&b);
}

// Decode's conversions (qk_tile_fp8, pv_tile_fp8). On sm_89+ the hardware converts four e4m3 codes (one
// word) into two f16 pairs of their values, exactly (every e4m3 value is an f16 normal); Q K^T then runs
// on f16 operands.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
constexpr bool kFp8CvtF16 = false;
#else
constexpr bool kFp8CvtF16 = true;
#endif
__device__ __forceinline__ void e4m3x4_to_f16x4(uint32_t w, uint32_t& lo, uint32_t& hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
#else
  __trap();  // kFp8CvtF16 keeps older GPUs off this path
  lo = hi = w;
#endif
}

// Two e4m3 codes of w (bytes kSelector picks, see below) as a bf16 pair of value code * 2^-120, in three
// instructions: prmt copies each code into the low byte of its half and fills the byte above with the
// code's sign (a selector nibble with bit 3 set replicates the byte's top bit), the shift puts sign,
// exponent and mantissa into bf16's fields and the mask drops the sign copy left in between. E4M3
// subnormals become bf16 subnormals; the other operand carries 2^64 instead (kFp8RawShift), so the
// products stay normal floats. kSelector: 0x9180 bytes (0, 1), 0xB3A2 (2, 3), 0xA280 (0, 2), 0xB391 (1, 3).
template <uint32_t kSelector>
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2_raw(uint32_t w) {
  uint32_t r;
  asm("prmt.b32 %0, %1, 0, %2;" : "=r"(r) : "r"(w), "n"(kSelector));
  return (r << 4) & 0x87F087F0u;
}
constexpr int kFp8RawShift = 120 - 64;  // raw tile (code * 2^-120) times 2^64 on the other operand

// Rows [row0, row0 + kRows) of a stage's K or V codes (`codes`, rows of fp8_tile_ld<D>) into the bf16
// tile dst ([kRows][tile_ld<D>]) by the kThreadsUsed threads numbered `tid`, as code * 2^-kFp8TileShift.
// Every thread first loads all of its chunks, then converts and stores them: the shared-memory loads
// overlap instead of each waiting on the last.
template <int D, int kRows, int kThreadsUsed>
__device__ __forceinline__ void dequantize_kv_rows(bf16* dst, const uint8_t* codes, int row0, int tid) {
  static_assert(kFp8TileShift == 120 - 64, "e4m3x4_to_bf16x4's factor");
  constexpr int kChunks = D / 16;  // 16 codes each
  static_assert(kRows * kChunks % kThreadsUsed == 0, "whole chunks per thread");
  constexpr int kIters = kRows * kChunks / kThreadsUsed;
  uint4 raw[kIters];
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int j = tid + it * kThreadsUsed;
    raw[it] = *reinterpret_cast<const uint4*>(codes + (row0 + j / kChunks) * fp8_tile_ld<D>() + (j % kChunks) * 16);
  }
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int j = tid + it * kThreadsUsed;
    uint32_t o[8];
    e4m3x4_to_bf16x4(raw[it].x, o[0], o[1]);
    e4m3x4_to_bf16x4(raw[it].y, o[2], o[3]);
    e4m3x4_to_bf16x4(raw[it].z, o[4], o[5]);
    e4m3x4_to_bf16x4(raw[it].w, o[6], o[7]);
    uint4* out = reinterpret_cast<uint4*>(dst + (j / kChunks) * tile_ld<D>() + (j % kChunks) * 16);
    out[0] = make_uint4(o[0], o[1], o[2], o[3]);
    out[1] = make_uint4(o[4], o[5], o[6], o[7]);
  }
}

// The FP8 scale factors of a thread's score elements s[nt][e] (keys 8nt + 2t + (e & 1) of the rows
// starting at key row `row0` of the stage): scores are multiplied by softmax_scale first, then by
// k_factor; probabilities by v_factor before P V.
template <int NT, int kKShift = kFp8TileShift, int kVShift = 0>
__device__ __forceinline__ void fp8_key_factors(float (&k_factor)[NT][2], float (&v_factor)[NT][2], const Fp8Stage& st,
                                                int row0, int t) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int r = row0 + nt * 8 + 2 * t + j;
      k_factor[nt][j] = exp2_int(st.k_exp[r] + kKShift);
      v_factor[nt][j] = exp2_int(st.v_exp[r] + kVShift);
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// FP8 KV straight from the codes (decode): the MMAs' B fragments are built in registers from ldmatrix
// loads of the stage's code rows, with no bf16 tile between. ldmatrix moves b16 elements, two codes each,
// so the fragments come out in a permuted order, which the other operand follows:
//   Q K^T: a lane's 4 codes of a 16-dim k-step are dims 4t..4t+3 of key g (one b16 pair). The MMA's k
//     slots (2t, 2t+1, 2t+8, 2t+9) take dims (4t, 4t+1, 4t+2, 4t+3), and Q's A fragments are loaded in
//     that order (load_q_frags_fp8). The sum over a k-step's 16 dims is the same set of products. On
//     sm_89+ the operands are f16 (codes converted by the hardware, Q rounded to f16: exact for
//     2^-14 <= |q| <= 65504, clamped above); before, bf16 (codes raw, Q times 2^64).
//   P V: ldmatrix.trans gives a lane dims 2g, 2g+1 of keys 2t, 2t+1; the conversion splits them into an
//     "even" n-tile (dims 2g of a 16-dim block) and an "odd" one (dims 2g + 1). Keys keep their order, so
//     each output element sums the same products in the same order as over a bf16 tile. The codes go in
//     raw (code * 2^-120) and P carries 2^(e_v + 64). o[2b] and o[2b+1] hold dims b*16 + 4t + 2(e & 1)
//     and that + 1 (see store_o_fp8).
// Scores come out as q . code * 2^-kFp8QkShift, values as code * 2^-kFp8TileShift, like the bf16 tiles'.
constexpr int kFp8QkShift = kFp8CvtF16 ? 0 : kFp8RawShift;

__device__ __forceinline__ void ldmatrix_x4_bytes(uint32_t (&r)[4], const uint8_t* p) {
  ldmatrix_x4(r, reinterpret_cast<const bf16*>(p));
}
__device__ __forceinline__ void ldmatrix_x4_trans_bytes(uint32_t (&r)[4], const uint8_t* p) {
  ldmatrix_x4_trans(r, reinterpret_cast<const bf16*>(p));
}

// A fragments of the 16 rows starting at qs in the k order and the operand type of qk_tile_fp8.
template <int D>
__device__ __forceinline__ void load_q_frags_fp8(uint32_t (&qf)[D / 16][4], const bf16* qs, int lane) {
  constexpr int kLd = tile_ld<D>();
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint2 top = *reinterpret_cast<const uint2*>(qs + g * kLd + kk * 16 + 4 * t);
    const uint2 bottom = *reinterpret_cast<const uint2*>(qs + (g + 8) * kLd + kk * 16 + 4 * t);
    qf[kk][0] = top.x;
    qf[kk][1] = bottom.x;
    qf[kk][2] = top.y;
    qf[kk][3] = bottom.y;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const __nv_bfloat162 q = *reinterpret_cast<const __nv_bfloat162*>(&qf[kk][i]);
      if constexpr (kFp8CvtF16) {
        float2 f = __bfloat1622float2(q);
        f.x = fminf(fmaxf(f.x, -65504.0f), 65504.0f);
        f.y = fminf(fmaxf(f.y, -65504.0f), 65504.0f);
        const __half2 h = __float22half2_rn(f);
        qf[kk][i] = *reinterpret_cast<const uint32_t*>(&h);
      } else {
        const __nv_bfloat162 r = __hmul2(q, __floats2bfloat162_rn(0x1p64f, 0x1p64f));
        qf[kk][i] = *reinterpret_cast<const uint32_t*>(&r);
      }
    }
  }
}

// s[2][4] = Q K^T for the 16 keys whose code rows (fp8_tile_ld<D> bytes apart) start at `codes`, as
// q . code * 2^-kFp8QkShift (the keys' scales come in afterwards, as with the bf16 tiles).
template <int D>
__device__ __forceinline__ void qk_tile_fp8(float (&s)[2][4], const uint32_t (&qf)[D / 16][4], const uint8_t* codes,
                                            int lane) {
  constexpr int kLd = fp8_tile_ld<D>();
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
  // Matrices of one ldmatrix.x4: (keys 0-7, dims 0-15), (keys 0-7, dims 16-31), (keys 8-15, dims 0-15),
  // (keys 8-15, dims 16-31) of a 32-dim slice.
  const uint8_t* row = codes + ((lane & 7) + ((lane >> 4) << 3)) * kLd + ((lane >> 3) & 1) * 16;
#pragma unroll
  for (int kp = 0; kp < D / 32; ++kp) {
    uint32_t r[4];
    ldmatrix_x4_bytes(r, row + kp * 32);
    uint32_t b[4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (kFp8CvtF16) {
        e4m3x4_to_f16x4(r[i], b[i][0], b[i][1]);
      } else {
        b[i][0] = e4m3x2_to_bf16x2_raw<0x9180>(r[i]);
        b[i][1] = e4m3x2_to_bf16x2_raw<0xB3A2>(r[i]);
      }
    }
    const auto mma = [](float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
      if constexpr (kFp8CvtF16) {
        mma_f16(d, a, b0, b1);
      } else {
        mma_bf16(d, a, b0, b1);
      }
    };
    mma(s[0], qf[2 * kp], b[0][0], b[0][1]);
    mma(s[1], qf[2 * kp], b[2][0], b[2][1]);
    mma(s[0], qf[2 * kp + 1], b[1][0], b[1][1]);
    mma(s[1], qf[2 * kp + 1], b[3][0], b[3][1]);
  }
}

// o += P V for the 16 keys whose value code rows start at `codes`; P (= s after online_softmax, times the
// keys' factors 2^(e_v + 64)) rounded to bf16. o in the even/odd dim order above, as code * 2^-kFp8TileShift.
template <int D>
__device__ __forceinline__ void pv_tile_fp8(float (&o)[D / 8][4], const float (&s)[2][4], const uint8_t* codes,
                                            int lane) {
  static_assert(kFp8TileShift == kFp8RawShift, "P's 2^64 makes the raw tiles' units the bf16 tiles' ones");
  constexpr int kLd = fp8_tile_ld<D>();
  const uint32_t a[4] = {pack_bf16x2(s[0][0], s[0][1]), pack_bf16x2(s[0][2], s[0][3]), pack_bf16x2(s[1][0], s[1][1]),
                         pack_bf16x2(s[1][2], s[1][3])};
  // Matrices of one ldmatrix.x4.trans: (keys 0-7, dims 0-15), (keys 8-15, dims 0-15), (keys 0-7, dims
  // 16-31), (keys 8-15, dims 16-31) of a 32-dim slice; register i = keys 2t, 2t+1 (+8) x dims 2g, 2g+1,
  // bytes (key 2t dim 2g, key 2t dim 2g+1, key 2t+1 dim 2g, key 2t+1 dim 2g+1).
  const uint8_t* row = codes + ((lane & 7) + ((lane >> 3) & 1) * 8) * kLd + (lane >> 4) * 16;
#pragma unroll
  for (int dq = 0; dq < D / 32; ++dq) {
    uint32_t r[4];
    ldmatrix_x4_trans_bytes(r, row + dq * 32);
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // 16-dim block 2dq + half
      const int blk = 2 * dq + half;
      const uint32_t* keys = r + 2 * half;  // [keys 0-7, keys 8-15]
      mma_bf16(o[2 * blk], a, e4m3x2_to_bf16x2_raw<0xA280>(keys[0]), e4m3x2_to_bf16x2_raw<0xA280>(keys[1]));
      mma_bf16(o[2 * blk + 1], a, e4m3x2_to_bf16x2_raw<0xB391>(keys[0]), e4m3x2_to_bf16x2_raw<0xB391>(keys[1]));
    }
  }
}

// Row r (0 or 1: rows g, g + 8) of a warp's o from pv_tile_fp8 into dst[D] (fp32, 16-byte aligned) in dim order.
template <int D>
__device__ __forceinline__ void store_o_fp8(float* dst, const float (&o)[D / 8][4], int r, int t) {
#pragma unroll
  for (int blk = 0; blk < D / 16; ++blk) {
    *reinterpret_cast<float4*>(dst + blk * 16 + 4 * t) =
        make_float4(o[2 * blk][2 * r], o[2 * blk + 1][2 * r], o[2 * blk][2 * r + 1], o[2 * blk + 1][2 * r + 1]);
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

// load_q_tile with plain loads (complete when the block's next barrier is), for kernels whose cp.async groups
// were committed before Q could be read.
template <int D, int kRowsTotal>
__device__ __forceinline__ void load_q_rows(bf16* qs, const bf16* src, int64_t src_stride, int rows) {
  constexpr int kLd = tile_ld<D>();
  constexpr int kChunks = D / 8;
  constexpr int kPerThread = (kRowsTotal * kChunks + kThreads - 1) / kThreads;
  uint4 v[kPerThread];  // every load issued before the first store
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int i = threadIdx.x + k * kThreads, r = i / kChunks, c = i % kChunks;
    v[k] = i < kRowsTotal * kChunks && r < rows ? *reinterpret_cast<const uint4*>(src + r * src_stride + c * 8)
                                                : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i < kRowsTotal * kChunks) *reinterpret_cast<uint4*>(qs + (i / kChunks) * kLd + (i % kChunks) * 8) = v[k];
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
  float alphas[2];
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
    alphas[r] = alpha;
  }
  // Rescale o only when some row of the warp has a new maximum: alpha is exactly 1 otherwise, and once the
  // first keys are in, most chunks raise no row's maximum. (Called by whole warps.)
  if (__any_sync(0xffffffffu, alphas[0] != 1.0f || alphas[1] != 1.0f)) {
#pragma unroll
    for (int dt = 0; dt < DT; ++dt) {
      o[dt][0] *= alphas[0];
      o[dt][1] *= alphas[0];
      o[dt][2] *= alphas[1];
      o[dt][3] *= alphas[1];
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
// Host side.

inline void check_params(const PagedAttentionParams& p, const char* what) {
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

struct DeviceLimits {
  int num_sms = 0;
  int max_smem_per_block = 0;  // opt-in dynamic shared memory
};
// Queried once per device.
inline DeviceLimits device_limits() {
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

// Decode blocks wanted on the whole GPU: decode spans stop splitting beyond it, and the decode workspace is bounded by
// it (by the larger of the two dtypes'). bf16 KV: 2 per SM. Fewer, longer spans leave fewer partials to merge: at
// batch 1 on an H100, 2 rather than 4 took the kernel and its merge from 21.9 to 17.6 us a layer at 8,000 keys (and
// at 2,048 keys of a 131,072-key graph 10.0 -> 8.2), no slower elsewhere. FP8 KV: 4 per SM, which also gives a long
// context's grid the four-blocks-of-two-stages launch its conversions want: on an H200 at batch 1, 32,000 keys, the
// kernel 31.4 -> 27.9 us and decode 193.3 -> 206.2 tok/s, 8,000 keys 230.3 / 229.3 tok/s (docs/PERFORMANCE.md,
// 2026-12-06). PAGODA_DECODE_BLOCKS_PER_SM (1 to 16) sets both, for measurements.
inline int decode_blocks_per_sm(bool fp8_kv) {
  static const int per_sm = [] {
    const int n = env_int("PAGODA_DECODE_BLOCKS_PER_SM", 0);
    return n >= 1 && n <= 16 ? n : 0;
  }();
  return per_sm > 0 ? per_sm : fp8_kv ? 4 : 2;
}
inline int decode_target_blocks(bool fp8_kv) { return decode_blocks_per_sm(fp8_kv) * device_limits().num_sms; }

// The plain fp32 kernel for head dims without a tensor-core path (paged_attention_generic.cu).
// `decode`: token t is sequence t.
void launch_generic(const PagedAttentionParams& p, bool decode, cudaStream_t stream);

}  // namespace pagoda::kernels::attention
