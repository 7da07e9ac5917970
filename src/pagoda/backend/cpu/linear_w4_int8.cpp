// 4-bit weights (QuantScheme::kInt4Group) times int8 activation blocks, as llama.cpp multiplies its Q4_0,
// Q4_1 and Q4_K blocks: the activations are quantized to Q8_0 blocks (32 values, one fp32 scale dx), and each
// (row, token, block) contributes
//   zero points:  s * dx * sum((q - z) * xq)         = s * dx * (sum(q * xq) - z * sum(xq))
//   offsets:      dx * (s * sum(q * xq) - m * sum(xq))   (value = q * s - m)
// with the sums exact in int32. Eight lanes each sum 4 products (maddubs then madd, the Q8_0 kernel's
// arrangement); the lanes are scaled and added in fp32 in one fixed order, so results do not depend on the
// batch. With AVX512-VNNI, linear_w4_vnni.cpp computes the same bits two tokens a register. Against fp32
// activations the error is the activations' rounding: up to 1/254 of a block's largest value per input
// (its effect on perplexity is in docs/QUANTIZATION.md).
#include "pagoda/backend/cpu/linear_w4_int8.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "pagoda/backend/cpu/cpu_isa.h"
#include "pagoda/backend/cpu/int8_lanes.h"
#include "pagoda/backend/cpu/linear_q8.h"
#include "pagoda/backend/cpu/linear_w4_vnni.h"
#include "pagoda/core/buffer.h"

namespace pagoda::cpu {
namespace {

constexpr int64_t kBlock = 32;
constexpr int64_t kRowsPerChunk = 16;

// 8 lanes, each the int32 sum of 4 products of unsigned codes and signed activations (no int16 overflow:
// 2 x 15 x 128 < 2^15).
inline __m256i lane_dots(__m256i codes, const int8_t* x) {
  const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  return _mm256_madd_epi16(_mm256_maddubs_epi16(codes, xv), _mm256_set1_epi16(1));
}

using Rows = W4Rows;

// R rows from r0 times T tokens from t0: out[t * n + r] for the tile.
template <int R, int T, bool kOffsets>
inline void tile(const Rows& w, int64_t r0, const Q8Blocks& a, int64_t t0, float* out, int64_t n) {
  const int64_t k = w.k, nb = k / kBlock;
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t g = b * kBlock / w.group_size;
    __m256i codes[R];
    float s[R], zm[R];  // scale; zero point or offset
    for (int r = 0; r < R; ++r) {
      codes[r] = int4_codes32(w.codes + (r0 + r) * (k / 2) + b * (kBlock / 2));
      s[r] = w.scales[(r0 + r) * w.groups + g];
      zm[r] = kOffsets ? w.offsets[(r0 + r) * w.groups + g] : static_cast<float>(w.zeros[(r0 + r) * w.groups + g]);
    }
    for (int t = 0; t < T; ++t) {
      const int64_t tb = (t0 + t) * nb + b;  // the token's block
      const float dx = a.scales[tb];
      const int8_t* xq = a.values.data() + tb * kBlock;
      const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.lane_sums.data() + tb * 8));
      for (int r = 0; r < R; ++r) {
        __m256i ints = lane_dots(codes[r], xq);
        if constexpr (!kOffsets) {  // exact: sum((q - z) * xq) per lane
          ints = _mm256_sub_epi32(ints, _mm256_mullo_epi32(sums, _mm256_set1_epi32(static_cast<int32_t>(zm[r]))));
        }
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ints), _mm256_set1_ps(s[r] * dx), acc[r][t]);
        if constexpr (kOffsets)
          acc[r][t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_set1_ps(zm[r] * dx), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) out[(t0 + t) * n + r0 + r] = hsum8(acc[r][t]);
}

// Rows [r0, r1) times every token: 4 rows x 2 tokens, or 2 rows x 4 (16 registers of 256 bits).
template <bool kOffsets>
void rows_times_tokens(const Rows& w, int64_t r0, int64_t r1, const Q8Blocks& a, int64_t num_tokens,
                       float* out, int64_t n) {
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    int64_t t = 0;
    for (; t + 2 <= num_tokens; t += 2) tile<4, 2, kOffsets>(w, r, a, t, out, n);
    if (t < num_tokens) tile<4, 1, kOffsets>(w, r, a, t, out, n);
  }
  for (; r < r1; ++r) {
    int64_t t = 0;
    for (; t + 4 <= num_tokens; t += 4) tile<1, 4, kOffsets>(w, r, a, t, out, n);
    for (; t < num_tokens; ++t) tile<1, 1, kOffsets>(w, r, a, t, out, n);
  }
}

// AVX512-VNNI: the tokens in pairs (linear_w4_vnni.cpp); each thread takes chunks of rows, and within a chunk
// blocks of pairs stay in L2 while the chunk's rows sweep them.
void linear_w4_int8_vnni(float* out, const float* x, int64_t num_tokens, const Rows& rows, int64_t n) {
  thread_local Q8Blocks calling_threads_blocks;
  thread_local Q8PairedBlocks calling_threads_pairs;
  quantize_q8_blocks(x, num_tokens, rows.k, calling_threads_blocks, /*with_lane_sums=*/rows.offsets != nullptr);
  const Q8TokenPairs pairs = pair_q8_blocks(calling_threads_blocks, num_tokens, rows.k, calling_threads_pairs);
  constexpr int64_t kPairsPerBlock = 24;
  constexpr int64_t kPairsUnpackedInPlace = 2;
  const int64_t num_pairs = (num_tokens + 1) / 2;
  const int64_t num_chunks = (n + kRowsPerChunk - 1) / kRowsPerChunk;
#pragma omp parallel if (n * rows.k * num_tokens >= (1 << 16))
  {
    thread_local Buffer prepared;  // this thread's chunk of rows, unpacked once for every pair
    const size_t bytes = static_cast<size_t>(w4_prepared_bytes(kRowsPerChunk, rows.k));
    if (prepared.size() < bytes) prepared = Buffer(bytes);
    auto* prep = static_cast<uint8_t*>(prepared.data());
#pragma omp for schedule(static)
    for (int64_t c = 0; c < num_chunks; ++c) {
      const int64_t r0 = c * kRowsPerChunk, count = std::min(kRowsPerChunk, n - r0);
      // A few tokens (decode): each block unpacked where it is used, four rows' codes streaming at once.
      // More: unpacked once into `prep` for all the pairs.
      const bool unpack_once = num_pairs > kPairsUnpackedInPlace;
      if (unpack_once) w4_prepare_rows_vnni(rows, r0, count, prep);
      for (int64_t p = 0; p < num_pairs; p += kPairsPerBlock)
        w4_rows_times_pairs_vnni(rows, unpack_once ? prep : nullptr, r0, count, pairs, p,
                                 std::min(num_pairs, p + kPairsPerBlock), out, n);
    }
  }
}

}  // namespace

bool linear_w4_int8_supported(const Weight& w) {
  return w.scheme == QuantScheme::kInt4Group && w.g_idx.empty() && w.group_size % kBlock == 0 &&
         w.in_features % kBlock == 0 && w.zeros.empty() != w.offsets.empty() &&
         (w.zeros.empty() || w.zeros.dtype == DType::kU8);
}

void linear_w4_int8(float* out, const float* x, int64_t num_tokens, const Weight& w) {
  const int64_t k = w.in_features, n = w.num_rows();
  const bool offsets = !w.offsets.empty();
  const Rows rows{w.data.ptr<const uint8_t>(), w.scales.ptr<const float>(),
                  offsets ? nullptr : w.zeros.ptr<const uint8_t>(), offsets ? w.offsets.ptr<const float>() : nullptr,
                  k, w.scales.dim(1), w.group_size};
  if (active_isa() == Isa::kAvx512 && cpu_features().avx512_vnni) return linear_w4_int8_vnni(out, x, num_tokens, rows, n);
  thread_local Q8Blocks calling_threads;  // read-only inside the parallel region, through `a`
  const Q8Blocks& a = calling_threads;      // (a thread_local named there would be each thread's own)
  quantize_q8_blocks(x, num_tokens, k, calling_threads, /*with_lane_sums=*/true);
  const int64_t num_chunks = (n + kRowsPerChunk - 1) / kRowsPerChunk;
#pragma omp parallel for schedule(static) if (n * k * num_tokens >= (1 << 16))
  for (int64_t c = 0; c < num_chunks; ++c) {
    const int64_t r0 = c * kRowsPerChunk, r1 = std::min(n, r0 + kRowsPerChunk);
    if (offsets) {
      rows_times_tokens<true>(rows, r0, r1, a, num_tokens, out, n);
    } else {
      rows_times_tokens<false>(rows, r0, r1, a, num_tokens, out, n);
    }
  }
}

}  // namespace pagoda::cpu
