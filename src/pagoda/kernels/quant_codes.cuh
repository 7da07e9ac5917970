// The quantized kernels' common pieces (quant_gemv.cu: the GEMV and the dequantization to bf16): the packed
// matrix as kernels see it, loads, and how each code width becomes bf16 MMA registers (the register order is
// backend/mma_layout/quant_tiles.h's).
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "pagoda/kernels/quant_gemv.h"

namespace pagoda::kernels {
namespace {

// The matrix as the kernel sees it (QuantTilesShape in ints).
struct Tiles {
  const uint4* codes;
  const float2* params;  // [tiles][groups][16] {s, z or m}
  int n, k, tiles, chunks, groups, steps_per_group;
  bool offsets;
};

// 16 bytes global -> shared without registers (sm_80+), in the current cp.async group.
__device__ __forceinline__ void copy_async16(void* shared, const void* global) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(address), "l"(global));
}
// The same for weights, read once: skips L1 and asks L2 for a 256-byte prefetch (as load_weights).
// The shared-window address form (a kernel may compute the addresses once and add offsets).
__device__ __forceinline__ void copy_weights_async16_to(uint32_t shared, const void* global) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(shared), "l"(global));
}
__device__ __forceinline__ void copy_weights_async16(void* shared, const void* global) {
  copy_weights_async16_to(static_cast<uint32_t>(__cvta_generic_to_shared(shared)), global);
}
// 16 bytes global -> shared (the shared-window address), zero-filled past `bytes` (0 or 16) without reading them.
__device__ __forceinline__ void copy_async16_zfill(uint32_t shared, const void* global, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared), "l"(global), "r"(bytes));
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;"); }
// Waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void copy_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

__device__ __forceinline__ uint32_t word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ uint32_t hsub2_bf16(uint32_t a, uint32_t b) {
  const __nv_bfloat162 d =
      __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<const uint32_t*>(&d);
}

// c += a · b: A 16 x 16 bf16 (rows x k), B 16 x 8 bf16 (k x tokens), C 16 x 8 fp32.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// How each code width becomes MMA registers (quant_tiles.h gives the register order). Zero: the per-row
// constants of the current group for rows p (lo) and p + 8 (hi); fragment: k-step s of the chunk's vectors.
template <TileCodes C>
struct Codes;

// (a & mask) | bits in one LOP3 (the compiler emits two).
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t mask, uint32_t bits) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(d) : "r"(a), "r"(mask), "r"(bits));
  return d;
}

// (a & mask) ^ bits in one LOP3.
__device__ __forceinline__ uint32_t and_xor(uint32_t a, uint32_t mask, uint32_t bits) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0x6a;" : "=r"(d) : "r"(a), "r"(mask), "r"(bits));
  return d;
}

// A k-step's 8 4-bit codes (one word, in the register order of quant_tiles.h) as bf16 128 + q: the 4-bit code OR-ed
// into the mantissa of 128.0 (exact: small integers).
__device__ __forceinline__ void u4_as_bf16_128(uint32_t (&a)[4], uint32_t w) {
  a[0] = and_or(w, 0x000f000fu, 0x43004300u);
  a[1] = and_or(w >> 4, 0x000f000fu, 0x43004300u);
  a[2] = and_or(w >> 8, 0x000f000fu, 0x43004300u);
  a[3] = and_or(w >> 12, 0x000f000fu, 0x43004300u);
}

// The sum of four bf16 (two bf16x2 words) in fp32.
__device__ __forceinline__ float sum4(uint2 b) {
  return (__uint_as_float(b.x << 16) + __uint_as_float(b.x & 0xffff0000u)) +
         (__uint_as_float(b.y << 16) + __uint_as_float(b.y & 0xffff0000u));
}

template <>
struct Codes<TileCodes::kU4> {
  static constexpr int kVectors = 1;
  struct Zero {
    uint32_t lo, hi;  // bf16x2 (128 + z, 128 + z)
  };
  __device__ static Zero zero(float z_lo, float z_hi) {
    return {pack_bf16x2(128.0f + z_lo, 128.0f + z_lo), pack_bf16x2(128.0f + z_hi, 128.0f + z_hi)};
  }
  __device__ static void fragment(uint32_t (&a)[4], const uint4 (&v)[kVectors], int s, const Zero& z) {
    u4_as_bf16_128(a, word_of(v[0], s));
    a[0] = hsub2_bf16(a[0], z.lo);
    a[1] = hsub2_bf16(a[1], z.hi);
    a[2] = hsub2_bf16(a[2], z.lo);
    a[3] = hsub2_bf16(a[3], z.hi);
  }
};

// Byte i of u as 2^23 + byte, in fp32.
__device__ __forceinline__ float magic_byte(uint32_t u, int i) {
  return __int_as_float(static_cast<int>(__byte_perm(u, 0x4b000000u, 0x7440u | static_cast<unsigned>(i))));
}

template <>
struct Codes<TileCodes::kI8> {
  static constexpr int kVectors = 2;
  struct Zero {
    float lo, hi;  // 2^23 + 128 + z
  };
  __device__ static Zero zero(float z_lo, float z_hi) { return {8388736.0f + z_lo, 8388736.0f + z_hi}; }
  __device__ static void fragment(uint32_t (&a)[4], const uint4 (&v)[kVectors], int s, const Zero& z) {
    const uint4& vec = v[s / 2];
    const uint32_t lo = word_of(vec, (s % 2) * 2) ^ 0x80808080u, hi = word_of(vec, (s % 2) * 2 + 1) ^ 0x80808080u;
    a[0] = pack_bf16x2(magic_byte(lo, 0) - z.lo, magic_byte(lo, 1) - z.lo);
    a[1] = pack_bf16x2(magic_byte(hi, 0) - z.hi, magic_byte(hi, 1) - z.hi);
    a[2] = pack_bf16x2(magic_byte(lo, 2) - z.lo, magic_byte(lo, 3) - z.lo);
    a[3] = pack_bf16x2(magic_byte(hi, 2) - z.hi, magic_byte(hi, 3) - z.hi);
  }
};

// Byte i of w (an e4m3 code) as fp32: exponent and mantissa moved under fp32's, times 2^(127 - 7).
__device__ __forceinline__ float e4m3_byte(uint32_t w, int i) {
  const uint32_t b = (w >> (8 * i)) & 0xffu;
  const float magnitude = __int_as_float(static_cast<int>((b & 0x7fu) << 20)) * 0x1p120f;
  return __int_as_float(__float_as_int(magnitude) | static_cast<int>((b & 0x80u) << 24));
}

template <>
struct Codes<TileCodes::kE4M3> {
  static constexpr int kVectors = 2;
  struct Zero {};
  __device__ static Zero zero(float, float) { return {}; }
  __device__ static void fragment(uint32_t (&a)[4], const uint4 (&v)[kVectors], int s, const Zero&) {
    const uint4& vec = v[s / 2];
    const uint32_t lo = word_of(vec, (s % 2) * 2), hi = word_of(vec, (s % 2) * 2 + 1);
    a[0] = pack_bf16x2(e4m3_byte(lo, 0), e4m3_byte(lo, 1));
    a[1] = pack_bf16x2(e4m3_byte(hi, 0), e4m3_byte(hi, 1));
    a[2] = pack_bf16x2(e4m3_byte(lo, 2), e4m3_byte(lo, 3));
    a[3] = pack_bf16x2(e4m3_byte(hi, 2), e4m3_byte(hi, 3));
  }
};


inline Tiles tiles_of(const QuantMatrix& m) {
  const QuantTilesShape& s = m.shape;
  const int64_t spg = s.group_size >= s.k ? (s.k + kTileStepCols - 1) / kTileStepCols : s.group_size / kTileStepCols;
  return Tiles{static_cast<const uint4*>(m.codes),
               reinterpret_cast<const float2*>(m.params),
               static_cast<int>(s.n),
               static_cast<int>(s.k),
               static_cast<int>(s.tiles()),
               static_cast<int>(s.chunks()),
               static_cast<int>(s.groups()),
               static_cast<int>(std::max<int64_t>(1, spg)),
               s.offsets};
}

}  // namespace
}  // namespace pagoda::kernels
