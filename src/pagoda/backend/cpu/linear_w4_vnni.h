// The AVX512-VNNI inner loop of the 4-bit x int8-block product (linear_w4_int8.cpp owns the activation
// quantization and the loop over rows and threads, and calls this when the CPU has AVX512-VNNI).
#pragma once

#include <cstdint>

#include "pagoda/backend/cpu/linear_q8.h"
#include "pagoda/backend/cpu/linear_w4_int8.h"

namespace pagoda::cpu {

// Rows [r0, r0 + count) unpacked for the kernel into `prepared` (64-byte aligned, w4_prepared_bytes long):
// per row and block, the codes as a signed operand and the lanes' starting sums.
int64_t w4_prepared_bytes(int64_t count, int64_t k);
void w4_prepare_rows_vnni(const W4Rows& w, int64_t r0, int64_t count, uint8_t* prepared);

// out[t * n + r] for rows [r0, r0 + count) and the tokens of pairs [pair_begin, pair_end) (x with lane sums
// when w has offsets), the rows read from `prepared` (prepared from r0) or, when it is null, unpacked as they
// are read (the same bits). Bit-identical to the AVX2 tile of linear_w4_int8.cpp.
void w4_rows_times_pairs_vnni(const W4Rows& w, const uint8_t* prepared, int64_t r0, int64_t count,
                              const Q8TokenPairs& x, int64_t pair_begin, int64_t pair_end, float* out, int64_t n);

}  // namespace pagoda::cpu
