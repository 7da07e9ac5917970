// CPU matrix-vector products for decode (a few tokens): each weight is converted to fp32 in registers
// right where it is multiplied, so the weight stream is read once from memory and nothing is written
// back. Weight dtypes: F16 (F16C), BF16 (shift), F32.
// The rows are shared among threads here; each group of rows runs the AVX2 tile below or the AVX-512 one
// (linear_avx512.cpp), as cpu_isa.h chooses.
#include <immintrin.h>

#include <algorithm>

#include "pagoda/backend/cpu/chunk_shares.h"
#include "pagoda/backend/cpu/cpu_isa.h"
#include "pagoda/backend/cpu/cpu_kernels.h"
#include "pagoda/backend/cpu/linear_avx512.h"
#include "pagoda/backend/cpu/linear_direct.h"
#include "pagoda/backend/cpu/simd.h"

namespace pagoda::cpu {
namespace {

template <class Row, int R, int T>
inline void rows_at(const uint8_t* w, int64_t row_bytes, int64_t r, const float* x, int64_t n, int64_t k, float* out) {
  Row rows[R];
  for (int i = 0; i < R; ++i) rows[i] = Row{reinterpret_cast<decltype(Row::p)>(w + (r + i) * row_bytes)};
  dot_block<Row, R, T, true>(rows, x, k, out + r, n);
}

// Four rows at a time: four independent weight streams per thread keep enough loads in flight.
template <class Row, int T>
void rows_times_tokens(const uint8_t* w, int64_t row_bytes, const float* x, int64_t n, int64_t k, float* out) {
  constexpr int kRows = T <= 2 ? 4 : 2;
  const int64_t num_groups = (n + kRows - 1) / kRows;
  for_each_chunk(num_groups, n * k >= (1 << 16), [&](int64_t g) {
    const int64_t r = g * kRows;
    if (r + kRows <= n) {
      rows_at<Row, kRows, T>(w, row_bytes, r, x, n, k, out);
    } else {
      for (int64_t i = r; i < n; ++i) rows_at<Row, 1, T>(w, row_bytes, i, x, n, k, out);
    }
  });
}

template <class Row>
void dispatch_tokens(const uint8_t* w, int64_t row_bytes, const float* x, int64_t num_tokens, int64_t n, int64_t k,
                     float* out) {
  switch (num_tokens) {
    case 1: return rows_times_tokens<Row, 1>(w, row_bytes, x, n, k, out);
    case 2: return rows_times_tokens<Row, 2>(w, row_bytes, x, n, k, out);
    case 3: return rows_times_tokens<Row, 3>(w, row_bytes, x, n, k, out);
    default: return rows_times_tokens<Row, 4>(w, row_bytes, x, n, k, out);
  }
}

// Sixteen rows a task, each task's rows in groups of four.
void direct_avx512(const uint8_t* w, DType w_dtype, int64_t row_bytes, const float* x, int64_t num_tokens, int64_t n,
                   int64_t k, float* out) {
  constexpr int64_t kRowsPerTask = 16;
  const int64_t num_tasks = (n + kRowsPerTask - 1) / kRowsPerTask;
  for_each_chunk(num_tasks, n * k >= (1 << 16), [&](int64_t task) {
    const int64_t r0 = task * kRowsPerTask;
    direct_rows_avx512(w, w_dtype, row_bytes, r0, std::min(kRowsPerTask, n - r0), x, num_tokens, n, k, out);
  });
}

}  // namespace

bool linear_direct_f32(float* out, const float* x, int64_t num_tokens, const void* w, DType w_dtype, int64_t n,
                       int64_t k) {
  if (num_tokens < 1 || num_tokens > kMaxDirectTokens) return false;
  if (w_dtype != DType::kF32 && w_dtype != DType::kF16 && w_dtype != DType::kBF16) return false;
  const auto* bytes = static_cast<const uint8_t*>(w);
  const int64_t row_bytes = dtype_storage_bytes(w_dtype, k);
  if (active_isa() == Isa::kAvx512) {
    direct_avx512(bytes, w_dtype, row_bytes, x, num_tokens, n, k, out);
    return true;
  }
  switch (w_dtype) {
    case DType::kF32: dispatch_tokens<F32Row>(bytes, row_bytes, x, num_tokens, n, k, out); return true;
    case DType::kF16: dispatch_tokens<F16Row>(bytes, row_bytes, x, num_tokens, n, k, out); return true;
    case DType::kBF16: dispatch_tokens<BF16Row>(bytes, row_bytes, x, num_tokens, n, k, out); return true;
    default: return false;
  }
}

}  // namespace pagoda::cpu
