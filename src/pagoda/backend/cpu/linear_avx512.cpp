// AVX-512 inner loops of the fp32 matrix products. Every (row, token) dot product is the same sequence of
// operations, whether it comes from decode (one row at a time) or prefill (register tiles of 4 rows x 6
// tokens), the weights converted to fp32 in registers in both: 16 lane-partial sums by FMA over k in steps of
// 16, one fixed horizontal sum, then the scalar tail. So results do not depend on the batch.
//
// Tried and slower on the Xeon these were measured on (bench/kernels/cpu_linear.cpp; docs/PERFORMANCE.md):
// packing rows and tokens into panels interleaved by 16 columns, and k slices of 512 with the tile's sums
// kept in memory between slices.
//
// The AVX-512 code generation is switched on after the includes, for this file's own functions only, which
// all live in an anonymous namespace except the two entry points: no inline function another file also
// instantiates is compiled here with AVX-512 (the linker could pick that copy for an AVX2-only machine).
#include "pagoda/backend/cpu/linear_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "pagoda/backend/cpu/register_pin.h"

#if defined(__clang__)  // clang (the fuzz build) has no `#pragma GCC target`: the same attribute, its way
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
// GCC 12's AVX-512 intrinsics start results from a deliberately undefined register, which it then reports.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#endif

namespace pagoda::cpu {
namespace {

// The fixed reduction of 16 partial sums: halves added (lane j + lane j+8), then 4, 2, 1.
inline float hsum16(__m512 v) {
  const __m256 lo = _mm512_castps512_ps256(v);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  const __m256 s8 = _mm256_add_ps(lo, hi);
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
  return _mm_cvtss_f32(s4);
}

// Weight rows as the tile sees them: 16 consecutive weights at a time as fp32, and one at a time for the tail.
struct F32Row {
  const float* p;
  __m512 load16(int64_t i) const { return _mm512_loadu_ps(p + i); }
  float at(int64_t i) const { return p[i]; }
};

struct F16Row {
  const uint16_t* p;
  __m512 load16(int64_t i) const {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
  }
  float at(int64_t i) const { return _cvtsh_ss(p[i]); }
};

struct BF16Row {
  const uint16_t* p;
  __m512 load16(int64_t i) const {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  float at(int64_t i) const {
    const uint32_t bits = static_cast<uint32_t>(p[i]) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
};

// How far ahead of a streamed decode row its bytes are prefetched into L2 (the rows of a thread's share follow one
// another in memory, so this reaches into the rows after). One core of the AMD EPYC Zen 5 VM streams F16 rows at
// 20-24 GB/s by itself, and both cores at about 2 x 22: the core's own stream, not the memory, bounds decode there.
// 12 KB ahead into L2: TinyLlama F16 generation at 2 threads +7.4% (12 alternating rounds), where 1-2 KB ahead into L1
// changed nothing this VM resolves and 4 KB was no better (docs/PERFORMANCE.md, 2026-12-07).
constexpr int64_t kStreamedRowL2PrefetchBytes = 12288;

// out[t * out_stride + r] = dot(w[r], x[t]) for R rows and T tokens; token t's activations at x + t * k. kStream
// (decode, one row streaming from memory): its bytes prefetched kStreamedRowL2PrefetchBytes ahead.
template <class Row, int R, int T, bool kStream = false>
inline void dot_tile(const Row (&w)[R], const float* x, int64_t k, float* out, int64_t out_stride) {
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  const int64_t k16 = k / 16 * 16;
  for (int64_t i = 0; i < k16; i += 16) {
    if constexpr (kStream) _mm_prefetch(reinterpret_cast<const char*>(w[0].p + i) + kStreamedRowL2PrefetchBytes, _MM_HINT_T1);
    __m512 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = w[r].load16(i);
    for (int t = 0; t < T; ++t) {
      __m512 xv = _mm512_loadu_ps(x + t * k + i);
      if constexpr (R > 1) keep_in_registers(xv);  // one load for the R rows
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      float s = hsum16(acc[r][t]);
      for (int64_t i = k16; i < k; ++i) s += w[r].at(i) * x[t * k + i];
      out[t * out_stride + r] = s;
    }
  }
}

// One row at a time, each thread reading its rows in address order: on an AMD EPYC Zen 5 (2 threads) four rows
// at a time generated 18.2-18.8 tok/s on TinyLlama F16 where one row at a time generates 21.1-21.2
// (docs/PERFORMANCE.md), as the 4- and 8-bit kernels measured before. A row's sums are the same either way.
template <class Row, int T>
void direct_rows(const uint8_t* w, int64_t row_bytes, int64_t r0, int64_t count, const float* x, int64_t n,
                 int64_t k, float* out) {
  for (int64_t r = r0; r < r0 + count; ++r) {
    const Row row[1] = {Row{reinterpret_cast<decltype(Row::p)>(w + r * row_bytes)}};
    dot_tile<Row, 1, T, /*kStream=*/true>(row, x, k, out + r, n);
  }
}

template <class Row>
void direct_rows_tokens(const uint8_t* w, int64_t row_bytes, int64_t r0, int64_t count, const float* x,
                        int64_t num_tokens, int64_t n, int64_t k, float* out) {
  switch (num_tokens) {
    case 1: return direct_rows<Row, 1>(w, row_bytes, r0, count, x, n, k, out);
    case 2: return direct_rows<Row, 2>(w, row_bytes, r0, count, x, n, k, out);
    case 3: return direct_rows<Row, 3>(w, row_bytes, r0, count, x, n, k, out);
    default: return direct_rows<Row, 4>(w, row_bytes, r0, count, x, n, k, out);
  }
}

constexpr int kTileRows = 4;
constexpr int kTileTokens = 6;  // 24 accumulators + 4 weight vectors + 1 activation vector of 32 registers

// A tile of tokens [t, t + T) against every row of the chunk: the tile's activations (T x k fp32) stay in L1
// while the rows (fp16: half the bytes) stream from L2, rather than each 4-row tile sweeping every token tile.
template <class Row, int T>
void token_tile_times_rows(const uint8_t* rows, int64_t row_bytes, int64_t nr, const float* x, int64_t k, float* out,
                           int64_t n) {
  const auto row = [&](int64_t r) { return Row{reinterpret_cast<decltype(Row::p)>(rows + r * row_bytes)}; };
  int64_t r = 0;
  for (; r + kTileRows <= nr; r += kTileRows) {
    const Row w[kTileRows] = {row(r), row(r + 1), row(r + 2), row(r + 3)};
    dot_tile<Row, kTileRows, T>(w, x, k, out + r, n);
  }
  for (; r < nr; ++r) {
    const Row w[1] = {row(r)};
    dot_tile<Row, 1, T>(w, x, k, out + r, n);
  }
}

template <class Row>
void chunk_times_tokens(const uint8_t* rows, int64_t row_bytes, int64_t nr, const float* x, int64_t t_begin,
                        int64_t t_end, int64_t k, float* out, int64_t n) {
  for (int64_t t = t_begin; t < t_end; t += kTileTokens) {
    const float* xt = x + t * k;
    float* ot = out + t * n;
    switch (std::min<int64_t>(kTileTokens, t_end - t)) {
      case 6: token_tile_times_rows<Row, 6>(rows, row_bytes, nr, xt, k, ot, n); break;
      case 5: token_tile_times_rows<Row, 5>(rows, row_bytes, nr, xt, k, ot, n); break;
      case 4: token_tile_times_rows<Row, 4>(rows, row_bytes, nr, xt, k, ot, n); break;
      case 3: token_tile_times_rows<Row, 3>(rows, row_bytes, nr, xt, k, ot, n); break;
      case 2: token_tile_times_rows<Row, 2>(rows, row_bytes, nr, xt, k, ot, n); break;
      default: token_tile_times_rows<Row, 1>(rows, row_bytes, nr, xt, k, ot, n); break;
    }
  }
}

}  // namespace

void direct_rows_avx512(const uint8_t* w, DType w_dtype, int64_t row_bytes, int64_t r0, int64_t count,
                        const float* x, int64_t num_tokens, int64_t n, int64_t k, float* out) {
  switch (w_dtype) {
    case DType::kF32: return direct_rows_tokens<F32Row>(w, row_bytes, r0, count, x, num_tokens, n, k, out);
    case DType::kF16: return direct_rows_tokens<F16Row>(w, row_bytes, r0, count, x, num_tokens, n, k, out);
    case DType::kBF16: return direct_rows_tokens<BF16Row>(w, row_bytes, r0, count, x, num_tokens, n, k, out);
    default: return;
  }
}

void chunk_times_tokens_avx512(const uint8_t* rows, DType dtype, int64_t row_bytes, int64_t nr, const float* x,
                               int64_t t_begin, int64_t t_end, int64_t k, float* out, int64_t n) {
  switch (dtype) {
    case DType::kF32: return chunk_times_tokens<F32Row>(rows, row_bytes, nr, x, t_begin, t_end, k, out, n);
    case DType::kF16: return chunk_times_tokens<F16Row>(rows, row_bytes, nr, x, t_begin, t_end, k, out, n);
    case DType::kBF16: return chunk_times_tokens<BF16Row>(rows, row_bytes, nr, x, t_begin, t_end, k, out, n);
    default: return;
  }
}

}  // namespace pagoda::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
