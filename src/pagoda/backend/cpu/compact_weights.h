// The CPU's compact forms of the weights its integer kernels read (ActivationQuant::kInt8Block: GGUF's block
// types). The loader's internal representation (core/quant_scheme.h) keeps an fp32 scale (and offset) per group
// and, for 4-bit codes, a U8 zero point: beside Q4_0's 4-bit codes that is 1.25 bits a weight where the file's
// own blocks hold 0.5 (an fp16 scale, a fixed zero point); beside Q4_K's, 2 where the file holds 0.5; beside
// Q6_K's, 2 where it holds 0.56. Decode streams every weight byte once per token, so those bytes are time.
// CpuOps::prepare_weights repacks each linear the integer kernels take into the first of these forms that
// holds exactly the same fp32 values (group_values.h), its scales and offsets alike:
//   kF16       every value converts to fp16 and back unchanged (Q4_0, Q5_0, Q8_0, Q4_1, Q5_1: fp16 in the
//              file): 2 bytes a group
//   kScaledI8  the values of every 256 columns are base * c, c an int8 (the k-quants: a super-block's d times a
//              sub-block's scale): 1 byte a group and 4 per 256 columns
//   as loaded  (fp32) otherwise
// drops a 4-bit weight's zero points when every one of them is 8 (Q4_0's), and holds an 8-bit weight's codes in
// 6 bits when every one fits (Q6_K's, Q5_K's, Q5_0's, Q5_1's: linear_w8_int8.h). The kernels read each form and
// compute the same bits as from the loaded weight.
#pragma once

#include <vector>

#include "pagoda/backend/cpu/group_values.h"
#include "pagoda/core/buffer.h"
#include "pagoda/loader/model_weights.h"

namespace pagoda::cpu {

// Whether w's scales and offsets are in a form the integer kernels read: F32, F16, or I8 with an F32 base
// [N, K / 256] and groups that divide 256 columns.
bool group_values_readable(const Weight& w);
// w's scales and offsets (none when it has none) as the kernels read them; w must be readable.
GroupValues scale_values(const Weight& w);
GroupValues offset_values(const Weight& w);

// w in its most compact form, with the new arrays' storage appended to `storage`; w itself when the integer
// kernels do not take it or no form is smaller.
Weight compact_weight(const Weight& w, std::vector<HostTensor>& storage);

// Every linear of `weights` compacted (the output projection too, unless it shares the embedding's storage:
// the embedding lookup reads the loaded form).
ModelWeights compact_linears(const ModelWeights& weights, std::vector<HostTensor>& storage);

}  // namespace pagoda::cpu
