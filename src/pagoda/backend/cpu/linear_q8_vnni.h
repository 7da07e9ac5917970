// The AVX-512 VNNI inner loop of the Q8_0 product (linear_q8.cpp owns the activation quantization and the
// loop over rows and threads, and calls this when the CPU has AVX512-VNNI; see cpu_isa.h).
#pragma once

#include <cstdint>

#include "pagoda/backend/cpu/linear_q8.h"

namespace pagoda::cpu {

// out[t * n + r] = dot(w row r, x[t]) for Q8_0 rows [r0, r0 + count) (`row_bytes` apart) and the tokens of
// pairs [pair_begin, pair_end). Bit-identical to the AVX2 kernel: the same int32 lane sums (4 products
// each), scaled and summed in the same order.
void q8_rows_times_pairs_vnni(const uint8_t* w, int64_t row_bytes, int64_t r0, int64_t count, const Q8TokenPairs& x,
                              int64_t pair_begin, int64_t pair_end, int64_t k, float* out, int64_t n);

}  // namespace pagoda::cpu
