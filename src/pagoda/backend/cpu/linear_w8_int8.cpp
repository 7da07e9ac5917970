// 8-bit integer weights (QuantScheme::kInt8Channel from GGUF's Q5_0, Q5_1, Q5_K and Q6_K) times int8
// activation blocks, as llama.cpp multiplies those blocks: the activations are quantized to Q8_0 blocks (32
// values, one fp32 scale dx), and each (row, token, lane of 4 columns) contributes
//   symmetric:  s * dx * sum(q * xq)
//   offsets:    s * dx * sum(q * xq) - m * dx * sum(xq)   (value = q * s - m)
// with the sums exact in int32 (linear_w8_int8.h says what each level computes). This file has the AVX2 loops
// (maddubs of |q| and the values with q's sign, in two 8-lane halves of a 64-column chunk: tiles of 2 rows x 2
// tokens for prompts, rows streamed one at a time for decode) and the activation
// quantization, and hands AVX512-VNNI machines to linear_w8_vnni.cpp, which computes the same bits.
#include "pagoda/backend/cpu/linear_w8_int8.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "pagoda/backend/cpu/compact_weights.h"
#include "pagoda/backend/cpu/cpu_isa.h"
#include "pagoda/backend/cpu/int8_lanes.h"
#include "pagoda/backend/cpu/row_chunk_loop.h"
#include "pagoda/core/check.h"

namespace pagoda::cpu {
namespace {

constexpr int64_t kBlock = 32;
// Up to this many tokens the rows stream (streamed_row, both levels); more: AVX512-VNNI unpacks each thread's rows
// once, AVX2 runs its 2 x 2 tiles.
constexpr int64_t kTokensUnpackedInPlace = 4;

struct ActivationStorage {
  std::vector<uint8_t> bytes;
  std::vector<float> dx, sdx;
};

// x [num_tokens, k] as the W8 kernels' int8 lanes (linear_w8_int8.h), quantized by `rule`; the values stored + 128
// (the VNNI loops: u8 operands) or as signed bytes (`signed_values`: the AVX2 loops, which sign them by the codes).
W8Activations quantize_activations(const float* x, int64_t num_tokens, int64_t k, Q8Rule rule, bool signed_values,
                                   ActivationStorage& s) {
  const int64_t chunks = w8_chunks(k), nb = k / kBlock, per_scale = q8_rule_block(rule) / kBlock;
  PAGODA_CHECK(nb % per_scale == 0, "linear_w8_int8: {} inputs are not whole blocks of {}", k, q8_rule_block(rule));
  const int32_t bias = signed_values ? 0 : 128;
  s.bytes.assign(static_cast<size_t>(num_tokens * chunks * kW8Chunk), static_cast<uint8_t>(bias));
  s.dx.assign(static_cast<size_t>(num_tokens * chunks * kW8Lanes), 0.0f);
  s.sdx.assign(static_cast<size_t>(num_tokens * chunks * kW8Lanes), 0.0f);
  Q8Block q[8];
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t b = 0; b < nb; ++b) {
      if (b % per_scale == 0) q8_blocks(x + t * k + b * kBlock, rule, q);
      const Q8Block& block = q[b % per_scale];
      const float d = block.d;
      const int64_t chunk = t * chunks + b / 2, lane0 = (b % 2) * 8;
      uint8_t* bytes = s.bytes.data() + chunk * kW8Chunk + (b % 2) * kBlock;
      for (int64_t lane = 0; lane < 8; ++lane) {
        int32_t sum = 0;
        for (int64_t j = 0; j < 4; ++j) {
          const int32_t v = block.v[lane * 4 + j];
          bytes[lane * 4 + j] = static_cast<uint8_t>(v + bias);
          sum += v;
        }
        s.dx[chunk * kW8Lanes + lane0 + lane] = d;
        // kQ8_1: the block's fp16 d * sum on its first lane (an offset is per block there)
        s.sdx[chunk * kW8Lanes + lane0 + lane] =
            rule == Q8Rule::kQ8_1 ? (lane == 0 ? block.sd : 0.0f) : static_cast<float>(sum) * d;
      }
    }
  }
  return W8Activations{s.bytes.data(), s.dx.data(), s.sdx.data(), chunks};
}

// The AVX2 loops: a chunk as two halves of 8 lanes (columns 32h..32h+31, one block).

// Half h of a 6-bit chunk (linear_w8_int8.h) as its 32 int8 codes: the low nibbles of the first 32 bytes (half 0)
// or their high nibbles (half 1); bits 4-5 from the 16 bytes after them, which hold columns 16i..16i+15 at bits
// 2i (i = 0..3), shifted into place per 16-byte lane (the bits a shift carries in from a neighbour are masked).
inline __m256i six_bit_codes_half(const uint8_t* chunk, int h) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk));
  const __m256i high_bits = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(chunk + 32)));
  const __m256i nibbles = h == 0 ? lo : _mm256_srli_epi16(lo, 4);
  const __m256i high = h == 0 ? _mm256_sllv_epi32(high_bits, _mm256_setr_epi32(4, 4, 4, 4, 2, 2, 2, 2))
                              : _mm256_srlv_epi32(high_bits, _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2));
  const __m256i u = _mm256_or_si256(_mm256_and_si256(nibbles, _mm256_set1_epi8(0x0f)),
                                    _mm256_and_si256(high, _mm256_set1_epi8(0x30)));
  return _mm256_sub_epi8(u, _mm256_set1_epi8(32));
}

using Form = GroupValues::Form;

// Token chunk `at`'s half h (lanes 8h..8h+7) against a row's codes q (magnitude = |q|), added to acc: the signed
// values given q's sign, maddubs against |q|, the lanes' exact int32 sums scaled in fp32. tile() and
// streamed_row() both add through this, so their bits agree.
template <bool kOffsets>
inline __m256 add_half(__m256 acc, __m256i q, __m256i magnitude, __m256 s, __m256 m, const W8Activations& x, int64_t at,
                       int h) {
  const __m256i values = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bytes + at * kW8Chunk + 32 * h));  // signed
  const __m256i ints = _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(values, q)), _mm256_set1_epi16(1));
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ints), _mm256_mul_ps(s, _mm256_loadu_ps(x.dx + at * 16 + 8 * h)), acc);
  if constexpr (kOffsets) acc = _mm256_fnmadd_ps(m, _mm256_loadu_ps(x.sdx + at * 16 + 8 * h), acc);
  return acc;
}

template <int R, int T, bool kOffsets, Form F>
inline void tile(const W8Rows& w, const __m256i (&lane_group)[2], int64_t r0, const W8Activations& x, int64_t t0,
                 float* out, int64_t n) {
  __m256 acc[R][T][2];
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t][0] = acc[r][t][1] = _mm256_setzero_ps();
  for (int64_t c = 0; c < x.chunks; ++c) {
    const int64_t columns = std::min<int64_t>(kW8Chunk, w.k - kW8Chunk * c);
    const int64_t gs = w.group_size;  // no division for whole chunks of groups of 16 or 32
    const bool whole = columns == kW8Chunk && (gs == 16 || gs == 32);
    const int64_t groups = whole ? (gs == 16 ? 4 : 2) : gs >= kW8Chunk ? 1 : (columns + gs - 1) / gs;
    const int64_t group0 = whole ? c * groups : c * kW8Chunk / gs;
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {  // the rows' codes and group values fetched ahead (int8_lanes.h)
      const int64_t row = r0 + r;
      _mm_prefetch(w.codes6 ? reinterpret_cast<const char*>(w.codes6 + (row * x.chunks + c) * kW6ChunkBytes) + kW8CodesPrefetchBytes
                            : reinterpret_cast<const char*>(w.codes + row * w.k + c * kW8Chunk) + kW8CodesPrefetchBytes,
                   _MM_HINT_T0);
      prefetch_group_values<F>(w.scales, row, row * w.groups + group0, group0);
      if constexpr (kOffsets) prefetch_group_values<F>(w.offsets, row, row * w.groups + group0, group0);
    }
    #pragma GCC unroll 4
    for (int h = 0; h < 2; ++h) {
      if (32 * h >= columns) continue;  // a missing half adds zeros (+0) on the other level
      #pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i q = w.codes6 ? six_bit_codes_half(w.codes6 + ((r0 + r) * x.chunks + c) * kW6ChunkBytes, h)
                                   : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.codes + (r0 + r) * w.k + c * kW8Chunk + 32 * h));
        const __m256i magnitude = _mm256_abs_epi8(q);
        const int64_t g = (r0 + r) * w.groups + group0;
        const auto lanes = [&](const GroupValues& v) {  // the chunk's 4 groups at most: the upper half unread
          return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(load_group_values<F>(v, r0 + r, g, group0, groups)),
                                          lane_group[h]);
        };
        const __m256 s = lanes(w.scales);
        __m256 m = _mm256_setzero_ps();
        if constexpr (kOffsets) m = lanes(w.offsets);
        #pragma GCC unroll 4
        for (int t = 0; t < T; ++t)
          acc[r][t][h] = add_half<kOffsets>(acc[r][t][h], q, magnitude, s, m, x, (t0 + t) * x.chunks + c, h);
      }
    }
  }
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) out[(t0 + t) * n + r0 + r] = hsum8(_mm256_add_ps(acc[r][t][0], acc[r][t][1]));
}

// One row x T tokens from t0, its chunks streamed from memory in address order (a few tokens), for whole chunks of
// groups of 16, 32 or 64 (every GGUF 8-bit-kind type's): addresses stepped, a chunk's group values loaded once for
// both halves, no per-chunk group arithmetic. The same sums in the same order as tile(), so the same bits.
template <int T, bool kOffsets, bool kSix, Form F>
inline void streamed_row(const W8Rows& w, const __m256i (&lane_group)[2], int64_t row, const W8Activations& x, int64_t t0,
                         float* out, int64_t n) {
  __m256 acc[T][2];
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  const int64_t groups_per_chunk = kW8Chunk / w.group_size;  // 4, 2 or 1
  constexpr int64_t chunk_bytes = kSix ? kW6ChunkBytes : kW8Chunk;
  const auto* codes = kSix ? reinterpret_cast<const uint8_t*>(w.codes6 + row * x.chunks * kW6ChunkBytes)
                           : reinterpret_cast<const uint8_t*>(w.codes + row * w.k);
  for (int64_t c = 0, at = row * w.groups, g0 = 0; c < x.chunks;
       ++c, codes += chunk_bytes, at += groups_per_chunk, g0 += groups_per_chunk) {
    _mm_prefetch(reinterpret_cast<const char*>(codes) + kW8CodesPrefetchBytes, _MM_HINT_T0);
    prefetch_group_values<F>(w.scales, row, at, g0);
    const __m128 scales = load_group_values<F>(w.scales, row, at, g0, groups_per_chunk);
    __m128 offsets;
    if constexpr (kOffsets) {
      prefetch_group_values<F>(w.offsets, row, at, g0);
      offsets = load_group_values<F>(w.offsets, row, at, g0, groups_per_chunk);
    }
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i q = kSix ? six_bit_codes_half(codes, h) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 32 * h));
      const __m256i magnitude = _mm256_abs_epi8(q);
      const __m256 s = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(scales), lane_group[h]);
      __m256 m = _mm256_setzero_ps();
      if constexpr (kOffsets) m = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(offsets), lane_group[h]);
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[t][h] = add_half<kOffsets>(acc[t][h], q, magnitude, s, m, x, (t0 + t) * x.chunks + c, h);
    }
  }
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) out[(t0 + t) * n + row] = hsum8(_mm256_add_ps(acc[t][0], acc[t][1]));
}

template <int R, bool kOffsets, Form F>
void rows_times_tokens(const W8Rows& w, const __m256i (&lane_group)[2], int64_t r0, const W8Activations& x,
                       int64_t t0, int64_t t1, float* out, int64_t n) {
  int64_t t = t0;
  for (; t + 2 <= t1; t += 2) tile<R, 2, kOffsets, F>(w, lane_group, r0, x, t, out, n);
  for (; t < t1; ++t) tile<R, 1, kOffsets, F>(w, lane_group, r0, x, t, out, n);
}

// Whether streamed_row takes w's rows: whole chunks of groups of 16, 32 or 64 (every GGUF 8-bit-kind type's).
bool streams_whole_chunks(const W8Rows& w) { return w.k % kW8Chunk == 0 && w.group_size <= kW8Chunk; }

// `decode`: the call has at most kTokensUnpackedInPlace tokens (its rows stream from memory).
void rows_times_tokens_avx2(const W8Rows& w, bool decode, int64_t r0, int64_t count, const W8Activations& x, int64_t t0,
                            int64_t t1, float* out, int64_t n) {
  alignas(32) int32_t idx[16];
  for (int l = 0; l < 16; ++l) idx[l] = w.group_size == 16 ? l / 4 : w.group_size == 32 ? l / 8 : 0;
  const __m256i lane_group[2] = {_mm256_load_si256(reinterpret_cast<const __m256i*>(idx)),
                                 _mm256_load_si256(reinterpret_cast<const __m256i*>(idx + 8))};
  with_form(w.scales.form, [&](auto form) {
    constexpr Form F = decltype(form)::value;
    int64_t r = r0;
    if (decode && streams_whole_chunks(w)) {  // rows one at a time, in address order
      const auto streamed = [&]<bool kOffsets, bool kSix>() {
        for (; r < r0 + count; ++r) {
          int64_t t = t0;
          for (; t + 2 <= t1; t += 2) streamed_row<2, kOffsets, kSix, F>(w, lane_group, r, x, t, out, n);
          if (t < t1) streamed_row<1, kOffsets, kSix, F>(w, lane_group, r, x, t, out, n);
        }
      };
      if (w.offsets) w.codes6 ? streamed.template operator()<true, true>() : streamed.template operator()<true, false>();
      else w.codes6 ? streamed.template operator()<false, true>() : streamed.template operator()<false, false>();
      return;
    }
    for (; r + 2 <= r0 + count; r += 2) {
      if (w.offsets) rows_times_tokens<2, true, F>(w, lane_group, r, x, t0, t1, out, n);
      else rows_times_tokens<2, false, F>(w, lane_group, r, x, t0, t1, out, n);
    }
    for (; r < r0 + count; ++r) {
      if (w.offsets) rows_times_tokens<1, true, F>(w, lane_group, r, x, t0, t1, out, n);
      else rows_times_tokens<1, false, F>(w, lane_group, r, x, t0, t1, out, n);
    }
  });
}

}  // namespace

bool linear_w8_int8_supported(const Weight& w) {
  const int64_t k = w.in_features, gs = w.group_size;
  const bool codes = w.data.dtype == DType::kI8 ||
                     (w8_six_bit_codes(w) && k % kW8Chunk == 0 && w.data.ndim == 2 && w.data.dim(1) == k / kW8Chunk * kW6ChunkBytes);
  return w.scheme == QuantScheme::kInt8Channel && codes && w.g_idx.empty() && w.zeros.empty() && k % kBlock == 0 &&
         (gs == 16 || gs == 32 || (gs > 0 && gs % kW8Chunk == 0) || gs == k) && group_values_readable(w);
}

void linear_w8_int8(float* out, const float* x, int64_t num_tokens, const Weight& w) {
  const int64_t k = w.in_features, n = w.num_rows();
  const bool six = w8_six_bit_codes(w);
  const W8Rows rows{six ? nullptr : w.data.ptr<const int8_t>(), six ? w.data.ptr<const uint8_t>() : nullptr,
                    scale_values(w), offset_values(w), k, w.scales.dim(1), w.group_size};
  thread_local ActivationStorage calling_threads;  // read-only inside the parallel region, through `a`
  const Q8Rule rule = q8_rule(w.activations == ActivationQuant::kInt8SuperBlock, !w.offsets.empty(), w.group_size);
  const bool vnni = active_isa() == Isa::kAvx512 && cpu_features().avx512_vnni;
  const W8Activations a = quantize_activations(x, num_tokens, k, rule, /*signed_values=*/!vnni, calling_threads);
  // A few tokens (decode) read each chunk where it is used; more: AVX512-VNNI unpacks each thread's rows once for
  // all the tokens, AVX2 runs its tiles.
  const bool unpack_once = num_tokens > kTokensUnpackedInPlace;
  if (!vnni) {
    for_each_row_chunk(
        n, k, num_tokens, 0, [](int64_t, int64_t, uint8_t*) {},
        [&](const uint8_t*, int64_t r0, int64_t count, int64_t t0, int64_t t1) {
          rows_times_tokens_avx2(rows, !unpack_once, r0, count, a, t0, t1, out, n);
        });
    return;
  }
  for_each_row_chunk(
      n, k, num_tokens, unpack_once ? a.chunks * kW8PreparedBytes : 0,
      [&](int64_t r0, int64_t count, uint8_t* prepared) { w8_prepare_rows_vnni(rows, r0, count, prepared); },
      [&](const uint8_t* prepared, int64_t r0, int64_t count, int64_t t0, int64_t t1) {
        w8_rows_times_tokens_vnni(rows, prepared, r0, count, a, t0, t1, out, n);
      });
}

}  // namespace pagoda::cpu
