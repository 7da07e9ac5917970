// The embedding lookup from a quantized table kept in the loader's row form (core/quant_scheme.h), not the
// GEMV's tiles: a lookup reads one row per token, so the table needs no layout for streaming. Each value is
// computed in fp32 as the CPU's dequantize_rows computes it ((q - z) * s, q * s - offset, or e4m3(q) * s),
// then rounded to bf16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace pagoda::kernels {

enum class QuantRowCodes : int { kInt4, kInt8, kFp8 };

struct QuantRowsTable {
  QuantRowCodes codes = QuantRowCodes::kInt8;
  const void* data = nullptr;      // kInt4: U8 [V, K/2] (k even in the low nibble); kInt8: I8 [V, K]; kFp8: e4m3 [V, K]
  const float* scales = nullptr;   // [V, groups]
  const void* zeros = nullptr;     // kInt4: U8 [V, groups]; kInt8: I32 [V, groups]; null: none (or offsets)
  const float* offsets = nullptr;  // [V, groups] or null
  int hidden = 0;                  // K (even)
  int group_size = 0;              // along K; K for one group a row
  int groups = 0;
};

// out [T, K] = the rows ids[t] of `table`, as bf16.
void quant_embedding(__nv_bfloat16* out, const int32_t* ids, const QuantRowsTable& table, int num_tokens,
                     cudaStream_t stream);

}  // namespace pagoda::kernels
