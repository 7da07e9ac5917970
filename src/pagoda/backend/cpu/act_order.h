// Act-order weights (GPTQ desc_act, compressed-tensors actorder "group") keep g_idx, the group of each input
// column, because GPTQ quantizes the columns in an order of its own (Weight::g_idx). Where every group holds
// group_size columns, which is what GPTQ writes, sorting the columns by group gives an ordinary grouped weight
// of the permuted input: W x = W' x[order], column j of W' being column order[j] of W. The backends multiply in
// that form (Weight::input_order): their fast kernels need groups of contiguous columns, and the permutation of
// the input is one gather a token (as vLLM's Marlin path does for these checkpoints: `sort_g_idx` at load,
// `permute_cols_kernel` on the input, csrc/quantization/gptq_marlin/gptq_marlin.cu).
// Both backends' prepare_weights sort with it (this file is in backend/cpu, which the CUDA backend builds on).
#pragma once

#include <optional>
#include <vector>

#include "pagoda/core/buffer.h"
#include "pagoda/loader/model_weights.h"

namespace pagoda::cpu {

// `w` (kInt4Group or kInt8Channel with g_idx) with its columns sorted by group: codes permuted into a new tensor of
// `storage`, input_order I32 [K] (also in `storage`), g_idx empty; scales, zeros and offsets are the same views.
// nullopt when w has no g_idx, or when a group does not hold group_size columns (the last group: what remains).
std::optional<Weight> sort_columns_by_group(const Weight& w, std::vector<HostTensor>& storage);

}  // namespace pagoda::cpu
