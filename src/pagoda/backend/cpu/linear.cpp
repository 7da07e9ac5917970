// CPU matrix multiply out = x · wᵀ for every weight dtype. Weight rows are converted to fp32 a chunk at a
// time (so each weight byte is read once per call), then a 2-row × 4-token AVX2 FMA micro-kernel
// computes the dot products while both operands sit in cache.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "pagoda/backend/cpu/cpu_kernels.h"
#include "pagoda/backend/cpu/linear_direct.h"
#include "pagoda/backend/cpu/linear_q8.h"

namespace pagoda::cpu {
namespace {

constexpr int64_t kRowsPerChunk = 16;   // weight rows converted together (per thread)
constexpr int64_t kTokensPerBlock = 32; // activation rows kept hot in L2 while a chunk is swept

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// out[t][r] for R weight rows × T tokens (R <= 2, T <= 4), dot products over k.
template <int R, int T>
inline void micro_kernel(const float* const* w_rows, const float* const* x_rows, int64_t k, float* out,
                         int64_t out_stride) {
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    __m256 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = _mm256_loadu_ps(w_rows[r] + i);
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(x_rows[t] + i);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      float s = hsum(acc[r][t]);
      for (int64_t j = i; j < k; ++j) s += w_rows[r][j] * x_rows[t][j];
      out[t * out_stride + r] = s;
    }
  }
}

template <int R>
void sweep_tokens(const float* const* w_rows, const float* x, int64_t t_begin, int64_t t_end, int64_t k,
                  float* out, int64_t n) {
  int64_t t = t_begin;
  for (; t + 4 <= t_end; t += 4) {
    const float* xr[4] = {x + t * k, x + (t + 1) * k, x + (t + 2) * k, x + (t + 3) * k};
    micro_kernel<R, 4>(w_rows, xr, k, out + t * n, n);
  }
  for (; t < t_end; ++t) {
    const float* xr[1] = {x + t * k};
    micro_kernel<R, 1>(w_rows, xr, k, out + t * n, n);
  }
}

}  // namespace

void linear_f32(float* out, const float* x, int64_t num_tokens, const void* w, DType w_dtype, int64_t n,
                int64_t k) {
  // Q8_0: integer dot products for every batch size (so results never depend on the batch).
  if (w_dtype == DType::kQ8_0) return linear_q8_0(out, x, num_tokens, w, n, k);
  // Decode: weights are streamed once and converted in registers.
  if (linear_direct_f32(out, x, num_tokens, w, w_dtype, n, k)) return;
  const int64_t row_bytes = dtype_storage_bytes(w_dtype, k);
  const int64_t num_chunks = (n + kRowsPerChunk - 1) / kRowsPerChunk;
  const bool parallel = n * k * std::max<int64_t>(num_tokens, 1) >= (1 << 16);

#pragma omp parallel if (parallel)
  {
    thread_local std::vector<float> rows;
    rows.resize(static_cast<size_t>(kRowsPerChunk * k));
#pragma omp for schedule(static)
    for (int64_t c = 0; c < num_chunks; ++c) {
      const int64_t r0 = c * kRowsPerChunk;
      const int64_t nr = std::min(kRowsPerChunk, n - r0);
      const float* src_rows = nullptr;
      if (w_dtype == DType::kF32) {
        src_rows = static_cast<const float*>(w) + r0 * k;
      } else {
        for (int64_t r = 0; r < nr; ++r)
          dequantize_row(static_cast<const uint8_t*>(w) + (r0 + r) * row_bytes, w_dtype, k, rows.data() + r * k);
        src_rows = rows.data();
      }
      for (int64_t tb = 0; tb < num_tokens; tb += kTokensPerBlock) {
        const int64_t te = std::min(num_tokens, tb + kTokensPerBlock);
        int64_t r = 0;
        for (; r + 2 <= nr; r += 2) {
          const float* wr[2] = {src_rows + r * k, src_rows + (r + 1) * k};
          sweep_tokens<2>(wr, x, tb, te, k, out + r0 + r, n);
        }
        if (r < nr) {
          const float* wr[1] = {src_rows + r * k};
          sweep_tokens<1>(wr, x, tb, te, k, out + r0 + r, n);
        }
      }
    }
  }
}

}  // namespace pagoda::cpu
