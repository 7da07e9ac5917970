// CPU matrix multiply out = x · wᵀ for every weight dtype. Weight rows go a chunk at a time (so each weight
// byte is read once per call), read as stored (F32, F16, BF16: converted in registers) or converted to fp32 first
// (the quantized kinds' dequantized rows), then a register tile computes the dot products while both operands sit
// in cache: simd.h's dot_block (3 rows x 4 tokens) with AVX2, linear_avx512.cpp's (4 rows x 6 tokens) with AVX-512.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "pagoda/backend/cpu/chunk_shares.h"
#include "pagoda/backend/cpu/cpu_isa.h"
#include "pagoda/backend/cpu/cpu_kernels.h"
#include "pagoda/backend/cpu/linear_avx512.h"
#include "pagoda/backend/cpu/linear_direct.h"
#include "pagoda/backend/cpu/simd.h"
#include "pagoda/core/buffer.h"

namespace pagoda::cpu {
namespace {

constexpr int64_t kRowsPerChunk = 16;   // weight rows converted together (per thread)
constexpr int64_t kTokensPerBlock = 48; // activation rows kept hot in L2 while a chunk is swept

template <class Row, int R>
void sweep_tokens(const Row (&w)[R], const float* x, int64_t t_begin, int64_t t_end, int64_t k, float* out,
                  int64_t n) {
  int64_t t = t_begin;
  for (; t + 4 <= t_end; t += 4) dot_block<Row, R, 4>(w, x + t * k, k, out + t * n, n);
  for (; t < t_end; ++t) dot_block<Row, R, 1>(w, x + t * k, k, out + t * n, n);
}

// The AVX2 tiles over rows [0, nr) of a chunk stored as Row (16-bit rows converted in registers): 3 rows x 4 tokens,
// then the rest.
template <class Row, class Elem>
void sweep_rows_avx2(const Elem* rows, int64_t nr, const float* x, int64_t tb, int64_t te, int64_t k, float* out,
                     int64_t n) {
  int64_t r = 0;
  for (; r + 3 <= nr; r += 3) {
    const Row wr[3] = {{rows + r * k}, {rows + (r + 1) * k}, {rows + (r + 2) * k}};
    sweep_tokens<Row, 3>(wr, x, tb, te, k, out + r, n);
  }
  for (; r + 2 <= nr; r += 2) {
    const Row wr[2] = {{rows + r * k}, {rows + (r + 1) * k}};
    sweep_tokens<Row, 2>(wr, x, tb, te, k, out + r, n);
  }
  if (r < nr) {
    const Row wr[1] = {{rows + r * k}};
    sweep_tokens<Row, 1>(wr, x, tb, te, k, out + r, n);
  }
}

// A chunk of weight rows as the tiles read them: fp32, or F16 / BF16 converted in registers.
struct TypedRows {
  const uint8_t* rows;
  DType dtype;
  int64_t row_bytes;
};

// rows_of(r0, nr, scratch) -> TypedRows for rows [r0, r0 + nr): as stored, or fp32 in `scratch`.
template <class RowsOf>
void sweep_row_chunks(float* out, const float* x, int64_t num_tokens, int64_t n, int64_t k, const RowsOf& rows_of) {
  const int64_t num_chunks = (n + kRowsPerChunk - 1) / kRowsPerChunk;
  const bool parallel = n * k * std::max<int64_t>(num_tokens, 1) >= (1 << 16);
  const bool avx512 = active_isa() == Isa::kAvx512;

  const size_t rows_bytes = static_cast<size_t>(kRowsPerChunk * k) * sizeof(float);
  for_each_chunk(num_chunks, parallel, [&](int64_t c) {
    thread_local Buffer rows;  // 64-byte aligned: no 64-byte load of a row straddles two cache lines
    if (rows.size() < rows_bytes) rows = Buffer(rows_bytes);
    const int64_t r0 = c * kRowsPerChunk;
    const int64_t nr = std::min(kRowsPerChunk, n - r0);
    const TypedRows src = rows_of(r0, nr, static_cast<float*>(rows.data()));
    for (int64_t tb = 0; tb < num_tokens; tb += kTokensPerBlock) {
      const int64_t te = std::min(num_tokens, tb + kTokensPerBlock);
      if (avx512) {
        chunk_times_tokens_avx512(src.rows, src.dtype, src.row_bytes, nr, x, tb, te, k, out + r0, n);
        continue;
      }
      if (src.dtype == DType::kF16)
        sweep_rows_avx2<F16Row>(reinterpret_cast<const uint16_t*>(src.rows), nr, x, tb, te, k, out + r0, n);
      else if (src.dtype == DType::kBF16)
        sweep_rows_avx2<BF16Row>(reinterpret_cast<const uint16_t*>(src.rows), nr, x, tb, te, k, out + r0, n);
      else
        sweep_rows_avx2<F32Row>(reinterpret_cast<const float*>(src.rows), nr, x, tb, te, k, out + r0, n);
    }
  });
}

}  // namespace

void linear_by_row_chunks(float* out, const float* x, int64_t num_tokens, int64_t n, int64_t k,
                          const RowChunkSource& rows_of) {
  sweep_row_chunks(out, x, num_tokens, n, k, [&](int64_t r0, int64_t nr, float* scratch) {
    return TypedRows{reinterpret_cast<const uint8_t*>(rows_of(r0, nr, scratch)), DType::kF32,
                     k * static_cast<int64_t>(sizeof(float))};
  });
}

void linear_f32(float* out, const float* x, int64_t num_tokens, const void* w, DType w_dtype, int64_t n,
                int64_t k) {
  // Decode: weights are streamed once and converted in registers.
  if (linear_direct_f32(out, x, num_tokens, w, w_dtype, n, k)) return;
  const int64_t row_bytes = dtype_storage_bytes(w_dtype, k);
  const auto* bytes = static_cast<const uint8_t*>(w);
  // The tiles read F16 and BF16 rows as stored, converting in registers as decode does (one pass over half the
  // bytes: TinyLlama F16 512-token prompts on a Zen 5, AVX-512 99-101 -> 119-123 tok/s, AVX2 58-64 -> 67-73).
  const bool as_stored = w_dtype == DType::kF32 || w_dtype == DType::kF16 || w_dtype == DType::kBF16;
  sweep_row_chunks(out, x, num_tokens, n, k, [&](int64_t r0, int64_t nr, float* scratch) {
    if (as_stored) return TypedRows{bytes + r0 * row_bytes, w_dtype, row_bytes};
    for (int64_t r = 0; r < nr; ++r) dequantize_row(bytes + (r0 + r) * row_bytes, w_dtype, k, scratch + r * k);
    return TypedRows{reinterpret_cast<const uint8_t*>(scratch), DType::kF32, k * static_cast<int64_t>(sizeof(float))};
  });
}

}  // namespace pagoda::cpu
