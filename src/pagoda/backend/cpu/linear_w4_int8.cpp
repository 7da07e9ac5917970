// 4-bit weights (QuantScheme::kInt4Group) times int8 activation blocks, as llama.cpp multiplies its Q4_0,
// Q4_1 and Q4_K blocks: the activations are quantized to Q8_0 blocks (32 values, one fp32 scale dx), and each
// (row, token, block) contributes
//   zero points:  s * dx * sum((q - z) * xq)
//   offsets:      s * dx * sum(q * xq) - m * dx * sum(xq)   (value = q * s - m)
// with the sums exact in int32. The columns go in chunks of 128, 16 lanes of 8 columns each (linear_w4_int8.h
// says how, and what each level computes); this file has the AVX2 loops (in two 8-lane halves: prompts maddubs
// the values + 128 against the signed codes, decode the unsigned codes against the signed values, streamed_row)
// and the activation quantization, and hands AVX512-VNNI machines to
// linear_w4_vnni.cpp, which computes the same bits one chunk a register. Against fp32 activations the error
// is the activations' rounding: up to 1/254 of a block's largest value per input (its effect on perplexity is
// in docs/QUANTIZATION.md).
#include "pagoda/backend/cpu/linear_w4_int8.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "pagoda/backend/cpu/compact_weights.h"
#include "pagoda/backend/cpu/cpu_isa.h"
#include "pagoda/backend/cpu/int8_lanes.h"
#include "pagoda/backend/cpu/linear_w4_vnni.h"
#include "pagoda/backend/cpu/row_chunk_loop.h"
#include "pagoda/core/check.h"

namespace pagoda::cpu {
namespace {

constexpr int64_t kBlock = 32;
constexpr int64_t kTokensUnpackedInPlace = 4;  // more tokens: each thread's rows unpacked once (row_chunk_loop.h)

struct ActivationStorage {
  std::vector<uint8_t> bytes;
  std::vector<float> dx, sdx;
  std::vector<int32_t> neg_sums;
};

// x [num_tokens, k] as the W4 kernels' int8 lanes (linear_w4_int8.h), quantized by `rule`; the values stored + 128
// (prepared rows and tiles: u8 operands) or as signed bytes (`signed_values`: the streamed rows, which multiply
// them against the unsigned codes).
W4Activations quantize_activations(const float* x, int64_t num_tokens, int64_t k, Q8Rule rule, bool signed_values,
                                   ActivationStorage& s) {
  const int64_t chunks = w4_chunks(k), nb = k / kBlock, per_scale = q8_rule_block(rule) / kBlock;
  PAGODA_CHECK(nb % per_scale == 0, "linear_w4_int8: {} inputs are not whole blocks of {}", k, q8_rule_block(rule));
  const int32_t bias = signed_values ? 0 : 128;
  s.bytes.assign(static_cast<size_t>(num_tokens * chunks * 128), static_cast<uint8_t>(bias));
  s.dx.assign(static_cast<size_t>(num_tokens * chunks * kW4Lanes), 0.0f);
  s.sdx.assign(static_cast<size_t>(num_tokens * chunks * kW4Lanes), 0.0f);
  s.neg_sums.assign(static_cast<size_t>(num_tokens * chunks * kW4Lanes), 0);
  Q8Block q[8];
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t b = 0; b < nb; ++b) {
      if (b % per_scale == 0) q8_blocks(x + t * k + b * kBlock, rule, q);
      const Q8Block& block = q[b % per_scale];
      const float d = block.d;
      const int64_t chunk = t * chunks + b / 4, lane0 = (b % 4) * 4;
      uint8_t* bytes = s.bytes.data() + chunk * 128;
      for (int64_t lane = lane0; lane < lane0 + 4; ++lane) {
        int32_t sum = 0;
        for (int64_t j = 0; j < 8; ++j) {
          const int32_t v = block.v[(lane - lane0) * 8 + j];
          bytes[(j % 2) * 64 + lane * 4 + j / 2] = static_cast<uint8_t>(v + bias);
          sum += v;
        }
        s.dx[chunk * kW4Lanes + lane] = d;
        // kQ8_1: the block's fp16 d * sum on its first lane (an offset is per block there)
        s.sdx[chunk * kW4Lanes + lane] =
            rule == Q8Rule::kQ8_1 ? (lane == lane0 ? block.sd : 0.0f) : static_cast<float>(sum) * d;
        s.neg_sums[chunk * kW4Lanes + lane] = -sum;
      }
    }
  }
  return W4Activations{s.bytes.data(), s.dx.data(), s.sdx.data(), s.neg_sums.data(), chunks, signed_values};
}

// The AVX2 loops: each chunk as two halves of 8 lanes (lanes 8h..8h+7: code bytes 32h.., values 32h.. of each
// 64, the 8 int32 and fp32 values of the half), computing linear_w4_int8.h's lanes exactly.

struct LaneGroups {  // per lane of a half, its group's index within the chunk, as an index and in every byte
  __m256i lane_group[2], lane_group_bytes[2];
};

LaneGroups make_lane_groups(int64_t group_size) {
  alignas(32) int32_t idx[16], bytes[16];
  for (int l = 0; l < 16; ++l) {
    idx[l] = group_size == 32 ? l / 4 : group_size == 64 ? l / 8 : 0;
    bytes[l] = idx[l] * 0x01010101;
  }
  LaneGroups lg;
  for (int h = 0; h < 2; ++h) {
    lg.lane_group[h] = _mm256_load_si256(reinterpret_cast<const __m256i*>(idx + 8 * h));
    lg.lane_group_bytes[h] = _mm256_load_si256(reinterpret_cast<const __m256i*>(bytes + 8 * h));
  }
  return lg;
}

// Built once per group-size class (32, 64, a multiple of 128): the per-chunk-of-rows calls only pick one.
const LaneGroups& lane_groups(int64_t group_size) {
  static const LaneGroups by_class[3] = {make_lane_groups(32), make_lane_groups(64), make_lane_groups(128)};
  return by_class[group_size == 32 ? 0 : group_size == 64 ? 1 : 2];
}

struct Chunk {
  int64_t code_bytes, groups, group0;  // valid code bytes (16 per block), valid groups, first group
};

Chunk chunk_at(const W4Rows& w, int64_t c) {  // no division for whole chunks of groups of 32 or 64
  const int64_t gs = w.group_size;
  if (4 * c + 4 <= w.k / kBlock) {
    if (gs == 32) return Chunk{64, 4, 4 * c};
    if (gs == 64) return Chunk{64, 2, 2 * c};
  }
  const int64_t blocks = std::min<int64_t>(4, w.k / kBlock - 4 * c);
  const int64_t blocks_per_group = gs / kBlock;
  return Chunk{16 * blocks, (blocks + blocks_per_group - 1) / blocks_per_group, c * kW4Chunk / gs};
}

// Per dword: all ones for the first `count` dwords.
inline __m256i first_dwords(int64_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(count)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

inline __m256i sum8_int32(__m256i even_products, __m256i odd_products) {  // int16 pair sums -> the lanes' 8
  return _mm256_madd_epi16(_mm256_add_epi16(even_products, odd_products), _mm256_set1_epi16(1));
}

struct Half {  // a half of a row's unpacked chunk
  __m256i even, odd, start;
  __m256 s, m;
};

template <class P>  // a W4Form
inline Half unpack_half(const W4Rows& w, const LaneGroups& lg, int64_t row, int64_t c, const Chunk& ch, int h) {
  const uint8_t* codes = w.codes + row * (w.k / 2) + c * (kW4Chunk / 2) + 32 * h;
  const int64_t valid = std::clamp<int64_t>(ch.code_bytes - 32 * h, 0, 32);
  const __m256i bytes = valid == 32 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes))
                                    : _mm256_maskload_epi32(reinterpret_cast<const int*>(codes), first_dwords(valid / 4));
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  Half u;
  u.even = _mm256_and_si256(bytes, nibble);
  u.odd = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nibble);
  const int64_t at = row * w.groups + ch.group0;
  if constexpr (!P::offsets) {
    __m256i zb = _mm256_set1_epi8(kW4SymmetricZero);
    if constexpr (P::zeros == W4Zeros::kPerGroup)
      zb = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(load_low_bytes(w.zeros + at, ch.groups))),
                               lg.lane_group_bytes[h]);
    u.even = _mm256_sub_epi8(u.even, zb);
    u.odd = _mm256_sub_epi8(u.odd, zb);
  }
  const __m256i k128 = _mm256_set1_epi8(static_cast<char>(0x80));
  u.start = _mm256_sub_epi32(_mm256_setzero_si256(),
                             sum8_int32(_mm256_maddubs_epi16(k128, u.even), _mm256_maddubs_epi16(k128, u.odd)));
  // The lanes' groups are the chunk's first 4 at most: the upper half of the 8 values is never read.
  const auto lanes = [&](const GroupValues& v) {
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(load_group_values<P::values>(v, row, at, ch.group0, ch.groups)),
                                    lg.lane_group[h]);
  };
  u.s = lanes(w.scales);
  if constexpr (P::offsets) u.m = lanes(w.offsets);
  return u;
}

inline Half load_prepared_half(const uint8_t* p, int h, bool offsets) {
  Half u;
  u.even = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32 * h));
  u.odd = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 64 + 32 * h));
  u.start = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * h));
  u.s = _mm256_load_ps(reinterpret_cast<const float*>(p + 192 + 32 * h));
  if (offsets) u.m = _mm256_load_ps(reinterpret_cast<const float*>(p + 256 + 32 * h));
  return u;
}

void prepare_rows_avx2(const W4Rows& w, int64_t r0, int64_t count, uint8_t* prepared) {
  const LaneGroups& lg = lane_groups(w.group_size);
  const int64_t chunks = w4_chunks(w.k);
  with_w4_form(w, [&](auto form) {
    using P = decltype(form);
    for (int64_t r = 0; r < count; ++r) {
      for (int64_t c = 0; c < chunks; ++c) {
        const Chunk ch = chunk_at(w, c);
        uint8_t* dst = prepared + (r * chunks + c) * kW4PreparedBytes;
        for (int h = 0; h < 2; ++h) {
          const Half u = unpack_half<P>(w, lg, r0 + r, c, ch, h);
          _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 32 * h), u.even);
          _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 64 + 32 * h), u.odd);
          _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 128 + 32 * h), u.start);
          _mm256_store_ps(reinterpret_cast<float*>(dst + 192 + 32 * h), u.s);
          if constexpr (P::offsets) _mm256_store_ps(reinterpret_cast<float*>(dst + 256 + 32 * h), u.m);
        }
      }
    }
  });
}

// R rows from r0 x T tokens from t0, as linear_w4_vnni.cpp's tile(); two accumulators (halves) per pair.
template <int R, int T, class P, bool kPrepared>
inline void tile(const W4Rows& w, const LaneGroups& lg, const uint8_t* prepared, int64_t r0, int64_t prep_r0,
                 const W4Activations& x, int64_t t0, float* out, int64_t n) {
  __m256 acc[R][T][2];
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t][0] = acc[r][t][1] = _mm256_setzero_ps();
  for (int64_t c = 0; c < x.chunks; ++c) {
    const Chunk ch = kPrepared ? Chunk{} : chunk_at(w, c);
    if constexpr (!kPrepared) {
      #pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {  // streamed rows: their codes and group values fetched ahead (int8_lanes.h)
        const int64_t row = r0 + r, at = row * w.groups + ch.group0;
        _mm_prefetch(reinterpret_cast<const char*>(w.codes + row * (w.k / 2) + c * (kW4Chunk / 2)) + kW4CodesPrefetchBytes,
                     _MM_HINT_T0);
        prefetch_group_values<P::values>(w.scales, row, at, ch.group0);
        if constexpr (P::offsets) prefetch_group_values<P::values>(w.offsets, row, at, ch.group0);
      }
    }
    #pragma GCC unroll 4
    for (int h = 0; h < 2; ++h) {
      #pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const Half u = kPrepared ? load_prepared_half(prepared + ((r0 - prep_r0 + r) * x.chunks + c) * kW4PreparedBytes, h, P::offsets)
                                 : unpack_half<P>(w, lg, r0 + r, c, ch, h);
        #pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const int64_t at = (t0 + t) * x.chunks + c;
          const uint8_t* bytes = x.bytes + at * 128 + 32 * h;
          const __m256i xe = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes));
          const __m256i xo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes + 64));
          const __m256 dx = _mm256_loadu_ps(x.dx + at * 16 + 8 * h);
          const __m256i ints = _mm256_add_epi32(
              u.start, sum8_int32(_mm256_maddubs_epi16(xe, u.even), _mm256_maddubs_epi16(xo, u.odd)));
          acc[r][t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ints), _mm256_mul_ps(u.s, dx), acc[r][t][h]);
          if constexpr (P::offsets)
            acc[r][t][h] = _mm256_fnmadd_ps(u.m, _mm256_loadu_ps(x.sdx + at * 16 + 8 * h), acc[r][t][h]);
        }
      }
    }
  }
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) out[(t0 + t) * n + r0 + r] = hsum8(_mm256_add_ps(acc[r][t][0], acc[r][t][1]));
}

// Whether streamed_row takes w's rows: whole chunks of groups of 32, 64 or 128 (every GGUF 4-bit type's).
bool streams_whole_chunks(const W4Rows& w) {
  return w.k % kW4Chunk == 0 && (w.group_size == 32 || w.group_size == 64 || w.group_size == kW4Chunk);
}

// One row x T tokens from t0, its chunks streamed from memory in address order (a few tokens), as
// linear_w4_vnni.cpp's streamed_row: the unsigned codes against the signed values (maddubs), the zero point
// through the lanes' value sums, sum((q - z) x) = sum(q x) + z (-sum(x)); a chunk's group values loaded once for
// both halves; addresses stepped, no chunk_at. The same int32 sums and fp32 steps as tile(), so the same bits.
template <int T, class P>
inline void streamed_row(const W4Rows& w, const LaneGroups& lg, int64_t row, const W4Activations& x, int64_t t0,
                         float* out, int64_t n) {
  static_assert(kW4SymmetricZero == 8, "the symmetric zero point is a shift by 3");
  __m256 acc[T][2];
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  const int64_t groups_per_chunk = kW4Chunk / w.group_size;  // 4, 2 or 1
  const uint8_t* codes = w.codes + row * (w.k / 2);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  for (int64_t c = 0, at = row * w.groups, g0 = 0; c < x.chunks;
       ++c, codes += kW4Chunk / 2, at += groups_per_chunk, g0 += groups_per_chunk) {
    _mm_prefetch(reinterpret_cast<const char*>(codes) + kW4CodesPrefetchBytes, _MM_HINT_T0);
    prefetch_group_values<P::values>(w.scales, row, at, g0);
    const __m128 scales = load_group_values<P::values>(w.scales, row, at, g0, groups_per_chunk);
    __m128 offsets;
    if constexpr (P::offsets) {
      prefetch_group_values<P::values>(w.offsets, row, at, g0);
      offsets = load_group_values<P::values>(w.offsets, row, at, g0, groups_per_chunk);
    }
    __m256i zeros;  // the chunk's zero points as int32
    if constexpr (P::zeros == W4Zeros::kPerGroup) {
      _mm_prefetch(reinterpret_cast<const char*>(w.zeros + at + kGroupValuesPrefetchGroups), _MM_HINT_T0);
      zeros = _mm256_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int32_t>(load_low_bytes(w.zeros + at, groups_per_chunk))));
    }
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 32 * h));
      const __m256i even = _mm256_and_si256(bytes, nibble), odd = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nibble);
      const __m256 s = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(scales), lg.lane_group[h]);
      __m256 m;
      if constexpr (P::offsets) m = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(offsets), lg.lane_group[h]);
      __m256i z;
      if constexpr (P::zeros == W4Zeros::kPerGroup) z = _mm256_permutevar8x32_epi32(zeros, lg.lane_group[h]);
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int64_t a = (t0 + t) * x.chunks + c;
        const uint8_t* values = x.bytes + a * 128 + 32 * h;
        const __m256i xe = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values));  // signed_values
        const __m256i xo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + 64));
        __m256i ints = sum8_int32(_mm256_maddubs_epi16(even, xe), _mm256_maddubs_epi16(odd, xo));
        if constexpr (!P::offsets) {
          const __m256i neg_sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.neg_sums + a * 16 + 8 * h));
          ints = _mm256_add_epi32(ints, P::zeros == W4Zeros::kSymmetric ? _mm256_slli_epi32(neg_sums, 3)
                                                                        : _mm256_mullo_epi32(z, neg_sums));
        }
        acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ints), _mm256_mul_ps(s, _mm256_loadu_ps(x.dx + a * 16 + 8 * h)), acc[t][h]);
        if constexpr (P::offsets) acc[t][h] = _mm256_fnmadd_ps(m, _mm256_loadu_ps(x.sdx + a * 16 + 8 * h), acc[t][h]);
      }
    }
  }
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) out[(t0 + t) * n + row] = hsum8(_mm256_add_ps(acc[t][0], acc[t][1]));
}

template <int R, class P, bool kPrepared>
void rows_times_tokens(const W4Rows& w, const LaneGroups& lg, const uint8_t* prepared, int64_t r0, int64_t prep_r0,
                       const W4Activations& x, int64_t t0, int64_t t1, float* out, int64_t n) {
  int64_t t = t0;
  for (; t + 2 <= t1; t += 2) tile<R, 2, P, kPrepared>(w, lg, prepared, r0, prep_r0, x, t, out, n);
  if (t < t1) tile<R, 1, P, kPrepared>(w, lg, prepared, r0, prep_r0, x, t, out, n);
}

// P: the weight's W4Form (the prepared rows hold the unpacked codes and fp32 scales whatever it was).
template <class P, bool kPrepared>
void rows(const W4Rows& w, const uint8_t* prepared, int64_t r0, int64_t count, const W4Activations& x, int64_t t0,
          int64_t t1, float* out, int64_t n) {
  const LaneGroups& lg = lane_groups(w.group_size);
  int64_t r = r0;
  if (!kPrepared && streams_whole_chunks(w)) {  // rows one at a time, in address order; the values signed
    for (; r < r0 + count; ++r) {
      int64_t t = t0;
      for (; t + 2 <= t1; t += 2) streamed_row<2, P>(w, lg, r, x, t, out, n);
      if (t < t1) streamed_row<1, P>(w, lg, r, x, t, out, n);
    }
    return;
  }
  for (; r + 2 <= r0 + count; r += 2) rows_times_tokens<2, P, kPrepared>(w, lg, prepared, r, r0, x, t0, t1, out, n);
  for (; r < r0 + count; ++r) rows_times_tokens<1, P, kPrepared>(w, lg, prepared, r, r0, x, t0, t1, out, n);
}

void rows_times_tokens_avx2(const W4Rows& w, const uint8_t* prepared, int64_t r0, int64_t count,
                            const W4Activations& x, int64_t t0, int64_t t1, float* out, int64_t n) {
  using F = GroupValues::Form;
  PAGODA_CHECK(x.signed_values == (prepared == nullptr && streams_whole_chunks(w)),
               "linear_w4_int8: the streamed rows take the values signed, the tiles + 128");
  if (prepared != nullptr) {  // the prepared rows' form is fp32 whatever the weight's
    return w.offsets ? rows<W4Form<W4Zeros::kOffsets, F::kF32>, true>(w, prepared, r0, count, x, t0, t1, out, n)
                     : rows<W4Form<W4Zeros::kPerGroup, F::kF32>, true>(w, prepared, r0, count, x, t0, t1, out, n);
  }
  with_w4_form(w, [&](auto form) { rows<decltype(form), false>(w, prepared, r0, count, x, t0, t1, out, n); });
}

}  // namespace

bool linear_w4_int8_supported(const Weight& w) {
  return w.scheme == QuantScheme::kInt4Group && w.g_idx.empty() && w.in_features % kBlock == 0 &&
         (w.group_size == 32 || w.group_size == 64 || (w.group_size > 0 && w.group_size % kW4Chunk == 0)) &&
         (w.zeros.empty() || (w.offsets.empty() && w.zeros.dtype == DType::kU8)) && group_values_readable(w);
}

void linear_w4_int8(float* out, const float* x, int64_t num_tokens, const Weight& w) {
  const int64_t k = w.in_features, n = w.num_rows();
  const W4Rows rows{w.data.ptr<const uint8_t>(), scale_values(w), w.zeros.empty() ? nullptr : w.zeros.ptr<const uint8_t>(),
                    offset_values(w), k, w.scales.dim(1), w.group_size};
  thread_local ActivationStorage calling_threads;  // read-only inside the parallel region, through `a`
  const Q8Rule rule = q8_rule(w.activations == ActivationQuant::kInt8SuperBlock, !w.offsets.empty(), w.group_size);
  const bool vnni = active_isa() == Isa::kAvx512 && cpu_features().avx512_vnni;
  const auto prepare = vnni ? w4_prepare_rows_vnni : prepare_rows_avx2;
  const auto multiply = vnni ? w4_rows_times_tokens_vnni : rows_times_tokens_avx2;
  // A few tokens (decode): each chunk unpacked where it is used, the rows' codes streaming from memory. More:
  // each thread's rows unpacked once, for all the tokens.
  const bool unpack_once = num_tokens > kTokensUnpackedInPlace;
  // The streamed rows (every VNNI decode; AVX2's of whole chunks) take the values signed, the tiles + 128.
  const bool signed_values = !unpack_once && (vnni || streams_whole_chunks(rows));
  const W4Activations a = quantize_activations(x, num_tokens, k, rule, signed_values, calling_threads);
  for_each_row_chunk(
      n, k, num_tokens, unpack_once ? a.chunks * kW4PreparedBytes : 0,
      [&](int64_t r0, int64_t count, uint8_t* prepared) { prepare(rows, r0, count, prepared); },
      [&](const uint8_t* prepared, int64_t r0, int64_t count, int64_t t0, int64_t t1) {
        multiply(rows, prepared, r0, count, a, t0, t1, out, n);
      });
}

}  // namespace pagoda::cpu
