// The AVX-512 inner loops of the fp32-accumulating matrix products (linear.cpp and linear_direct.cpp own the
// loops over rows and threads and call these when active_isa() is kAvx512; see cpu_isa.h).
#pragma once

#include <cstdint>

#include "pagoda/core/dtype.h"

namespace pagoda::cpu {

// Decode: out[t * n + r] = dot(w row r, x[t]) for rows [r0, r0 + count) and t < num_tokens (at most 4), the
// weight rows (F32, F16 or BF16, `row_bytes` apart) converted to fp32 in registers.
void direct_rows_avx512(const uint8_t* w, DType w_dtype, int64_t row_bytes, int64_t r0, int64_t count,
                        const float* x, int64_t num_tokens, int64_t n, int64_t k, float* out);

// Prefill: out[t * n + r] = dot(rows[r], x[t]) for rows [nr, k] (F32, F16 or BF16, `row_bytes` apart, converted
// to fp32 in registers) and tokens [t_begin, t_end).
void chunk_times_tokens_avx512(const uint8_t* rows, DType dtype, int64_t row_bytes, int64_t nr, const float* x,
                               int64_t t_begin, int64_t t_end, int64_t k, float* out, int64_t n);

}  // namespace pagoda::cpu
