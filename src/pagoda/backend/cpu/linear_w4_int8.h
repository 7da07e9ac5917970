// 4-bit weights times int8 activation blocks in integer arithmetic (ActivationQuant::kInt8Block; see
// linear_w4_int8.cpp).
#pragma once

#include <cstdint>

#include "pagoda/backend/cpu/group_values.h"
#include "pagoda/loader/model_weights.h"

namespace pagoda::cpu {

// A 4-bit weight's arrays, as the integer kernels read them.
struct W4Rows {
  const uint8_t* codes;  // [N, K / 2], low nibble first
  GroupValues scales;    // [N, groups]
  const uint8_t* zeros;  // [N, groups]; null with offsets, or when every zero point is kW4SymmetricZero
  GroupValues offsets;   // [N, groups], or none
  int64_t k, groups, group_size;
};

// The zero point of a 4-bit weight that keeps none (the CPU's compact form of GGUF Q4_0: compact_weights.h).
constexpr int kW4SymmetricZero = 8;

// How a 4-bit weight's codes meet zero: a zero point per group, kW4SymmetricZero throughout, or an offset per
// group; with the form of its scales and offsets, what the kernels are instantiated for (with_w4_form).
enum class W4Zeros : uint8_t { kPerGroup, kSymmetric, kOffsets };
template <W4Zeros Z, GroupValues::Form F>
struct W4Form {
  static constexpr W4Zeros zeros = Z;
  static constexpr GroupValues::Form values = F;
  static constexpr bool offsets = Z == W4Zeros::kOffsets;
};
template <class Fn>
void with_w4_form(const W4Rows& w, Fn&& fn) {
  with_form(w.scales.form, [&](auto f) {
    constexpr GroupValues::Form F = decltype(f)::value;
    if (w.offsets) fn(W4Form<W4Zeros::kOffsets, F>{});
    else if (w.zeros == nullptr) fn(W4Form<W4Zeros::kSymmetric, F>{});
    else fn(W4Form<W4Zeros::kPerGroup, F>{});
  });
}

// The kernels walk K in chunks of 128 columns (4 blocks of 32; a last partial chunk is padded with zeros),
// each chunk as 16 lanes of 8 consecutive columns: lane l holds columns 8l..8l+7, which are the low and high
// nibbles of the chunk's code bytes 4l..4l+3. So one load, a mask and a shift unpack 128 codes, the even
// columns (low nibbles) and the odd ones (high nibbles) side by side.
constexpr int64_t kW4Chunk = 128;
constexpr int64_t kW4Lanes = 16;
inline int64_t w4_chunks(int64_t k) { return (k + kW4Chunk - 1) / kW4Chunk; }

// Activations as llama.cpp's Q8_0 blocks (per token and block of 32: d = amax / 127, values round(x / d)), laid
// out for those lanes. Per token and chunk:
//   bytes [128] u8: the values + 128 at each lane's even columns (lane l's four at 4l..4l+3), then at its odd
//         columns (64 + 4l..); for the streamed loops (decode: signed_values) the values themselves, as int8
//   dx    [16] f32: lane l's block scale d (lane l is in block l / 4)
//   sdx   [16] f32: lane l's 8 values added (exact), times d: what an offset multiplies
//   neg_sums [16] i32: minus lane l's 8 values added: what a zero point multiplies
// Columns past K (the padding) have value 0 and d 0.
struct W4Activations {
  const uint8_t* bytes;     // [tokens, chunks, 128]
  const float* dx;          // [tokens, chunks, 16]
  const float* sdx;         // [tokens, chunks, 16]
  const int32_t* neg_sums;  // [tokens, chunks, 16]
  int64_t chunks;
  bool signed_values;  // bytes hold the values as int8, which the streamed rows multiply as they are (no xor a chunk)
};

// A chunk of a row unpacked for the kernels (64-byte aligned, kW4PreparedBytes):
//   w     [128] i8: the signed codes, q - z with zero points (q with offsets), in the lanes' even/odd order
//   start [16] i32: -128 x (lane's 8 codes added), which turns sums against values + 128 into sums against
//         the values
//   s     [16] f32: lane's group scale;  m [16] f32: lane's group offset (offsets form only)
constexpr int64_t kW4PreparedBytes = 320;

// The product, lane by lane: for each (row, token) 16 fp32 sums, for each chunk
//   ints    = sum over the lane's 8 columns of (q - z) * value (or q * value), exact in int32
//   acc[l]  = fma(float(ints), s * dx, acc[l]);  with offsets then acc[l] = fnmadd(m, sdx, acc[l])
// and the result hsum8(acc[0..7] + acc[8..15]). Each instruction-set level computes exactly this, so results
// depend neither on the batch nor on the machine.

// Whether linear_w4_int8 takes `w`: an int4-group weight without act-order (g_idx), K a multiple of 32 and
// groups of 32, 64 or a multiple of 128 (so no lane straddles two groups); loaded, or in a compact form of
// compact_weights.h.
bool linear_w4_int8_supported(const Weight& w);

// out [num_tokens, N] = x [num_tokens, K] · w [N, K]^T with x quantized to Q8_0 blocks first (llama.cpp's
// scheme for its 4-bit files). Every (row, token) dot product is the same whatever the batch.
void linear_w4_int8(float* out, const float* x, int64_t num_tokens, const Weight& w);

}  // namespace pagoda::cpu
