// The AVX512-VNNI loops of the 4-bit x int8-block product (linear_w4_int8.cpp owns the activation
// quantization and the loop over rows and threads, and calls these when the CPU has AVX512-VNNI).
#pragma once

#include <cstdint>

#include "pagoda/backend/cpu/linear_w4_int8.h"

namespace pagoda::cpu {

// Rows [r0, r0 + count) unpacked into `prepared` (64-byte aligned, count x chunks x kW4PreparedBytes).
void w4_prepare_rows_vnni(const W4Rows& w, int64_t r0, int64_t count, uint8_t* prepared);

// out[t * n + r] for rows [r0, r0 + count) and tokens [t0, t1), the rows read from `prepared` (prepared from
// r0) or, when it is null, unpacked in registers as they are read (the same bits). Bit-identical to the AVX2
// loops of linear_w4_int8.cpp.
void w4_rows_times_tokens_vnni(const W4Rows& w, const uint8_t* prepared, int64_t r0, int64_t count,
                               const W4Activations& x, int64_t t0, int64_t t1, float* out, int64_t n);

}  // namespace pagoda::cpu
