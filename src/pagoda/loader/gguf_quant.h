// GGUF block-quantized tensors (Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) -> the internal quantized Weight of
// core/quant_scheme.h, once at load:
//   Q4_0          kInt4Group  g32  zeros 8
//   Q4_1, Q4_K    kInt4Group  g32  offsets
//   Q5_0          kInt8Channel g32 symmetric (codes q - 16)
//   Q5_1, Q5_K    kInt8Channel g32 offsets (codes 0..31)
//   Q6_K          kInt8Channel g16 symmetric (codes q - 32)
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "pagoda/core/buffer.h"
#include "pagoda/loader/gguf_file.h"
#include "pagoda/loader/model_weights.h"

namespace pagoda {

// The Weight of the 2-D tensor `t` [N, K] (a type with a gguf_block_conversion), with row r read from the
// file's row src_row(r) (the Q/K un-permutation): codes, scales and zeros or offsets of a row move together.
// Its storage is appended to `owned`.
Weight convert_gguf_blocks(const GgufTensorInfo& t, const std::function<int64_t(int64_t)>& src_row,
                           std::vector<HostTensor>& owned);

}  // namespace pagoda
