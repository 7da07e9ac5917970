// 8-bit integer weights times int8 activation blocks in integer arithmetic (ActivationQuant::kInt8Block on a
// kInt8Channel weight: GGUF's Q5_0, Q5_1, Q5_K and Q6_K; see linear_w8_int8.cpp).
#pragma once

#include <cstdint>

#include "pagoda/backend/cpu/group_values.h"
#include "pagoda/loader/model_weights.h"

namespace pagoda::cpu {

// The kernels walk K in chunks of 64 columns (2 blocks of 32; a last half chunk is padded with zeros), each
// chunk as 16 lanes of 4 consecutive columns: lane l holds columns 4l..4l+3.
constexpr int64_t kW8Chunk = 64;
constexpr int64_t kW8Lanes = 16;
inline int64_t w8_chunks(int64_t k) { return (k + kW8Chunk - 1) / kW8Chunk; }

// The CPU's 6-bit form of the codes (compact_weights.h: every code in [-32, 31], K a multiple of 64, as GGUF's
// Q6_K, Q5_K, Q5_0 and Q5_1 give), data U8 [N, K / 64 * 48]: per row and 64-column chunk, with u = code + 32,
//   [32] u8  byte j: u[j] & 15 | (u[j + 32] & 15) << 4
//   [16] u8  byte j: (u[j] >> 4) | (u[j + 16] >> 4) << 2 | (u[j + 32] >> 4) << 4 | (u[j + 48] >> 4) << 6
// 6 bits a weight where the int8 form has 8 (a Q6_K file holds 6.56 with its scales): decode streams a quarter
// fewer code bytes. The kernels unpack a chunk into the int8 codes and compute the same bits.
constexpr int64_t kW6ChunkBytes = 48;
inline bool w8_six_bit_codes(const Weight& w) {
  return w.scheme == QuantScheme::kInt8Channel && w.data.dtype == DType::kU8;
}

// An 8-bit weight's arrays, as the integer kernels read them.
struct W8Rows {
  const int8_t* codes;     // [N, K]; null in the 6-bit form
  const uint8_t* codes6;   // [N, K / 64, 48] in the 6-bit form (above); null otherwise
  GroupValues scales;   // [N, groups]
  GroupValues offsets;  // [N, groups], or none (symmetric)
  int64_t k, groups, group_size;
};

// Activations as llama.cpp's Q8_0 blocks (per token and block of 32: d = amax / 127, values round(x / d)), per
// token and chunk:
//   bytes [64] u8: the values + 128, in column order (the AVX2 loops: the values as int8)
//   dx    [16] f32: lane l's block scale d (lane l is in block l / 8)
//   sdx   [16] f32: lane l's 4 values added (exact), times d: what an offset multiplies
// Columns past K (the padding) have value 0 and d 0.
struct W8Activations {
  const uint8_t* bytes;  // [tokens, chunks, 64]
  const float* dx;       // [tokens, chunks, 16]
  const float* sdx;      // [tokens, chunks, 16]
  int64_t chunks;
};

// The product, lane by lane: for each (row, token) 16 fp32 sums, for each chunk
//   ints    = sum over the lane's 4 columns of q * value, exact in int32
//   acc[l]  = fma(float(ints), s * dx, acc[l]);  with offsets then acc[l] = fnmadd(m, sdx, acc[l])
// and the result hsum8(acc[0..7] + acc[8..15]). Each instruction-set level computes exactly this.

// Whether linear_w8_int8 takes `w`: a kInt8Channel weight without zero points or act-order, K a multiple of
// 32 and groups of 16, 32, a multiple of 64 or the whole row (so no lane straddles two groups); loaded, or in a
// compact form of compact_weights.h (the 6-bit codes included).
bool linear_w8_int8_supported(const Weight& w);

// out [num_tokens, N] = x [num_tokens, K] · w [N, K]^T with x quantized to Q8_0 blocks first. Every (row,
// token) dot product is the same whatever the batch.
void linear_w8_int8(float* out, const float* x, int64_t num_tokens, const Weight& w);

// A chunk of a row unpacked for the AVX512-VNNI loops (64-byte aligned, kW8PreparedBytes): the codes [64],
// the lanes' starting sums -128 x (lane's codes added) [16 x i32], scales and offsets [16 x f32 each].
constexpr int64_t kW8PreparedBytes = 256;

// The AVX512-VNNI loops (linear_w8_vnni.cpp): rows [r0, r0 + count) unpacked into `prepared` (count x chunks x
// kW8PreparedBytes); and out[t * n + r] for those rows and tokens [t0, t1), read from `prepared` (prepared
// from r0) or, when it is null, unpacked as they are read (the same bits).
void w8_prepare_rows_vnni(const W8Rows& w, int64_t r0, int64_t count, uint8_t* prepared);
void w8_rows_times_tokens_vnni(const W8Rows& w, const uint8_t* prepared, int64_t r0, int64_t count,
                               const W8Activations& x, int64_t t0, int64_t t1, float* out, int64_t n);

}  // namespace pagoda::cpu
