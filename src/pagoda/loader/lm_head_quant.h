// `--quantize-lm-head fp8`: the output projection, which most quantized checkpoints keep in 16 bits (22% of what
// a W4 Llama-3-8B streams per token), quantized at load to FP8 W8A8: e4m3 codes per row with scale
// absmax / 448 (round to nearest even, as compressed-tensors' FP8 quantizer), inputs per token
// (ActivationQuant::kFp8PerToken). Both backends then run it as any W8A8 linear.
#pragma once

#include <vector>

#include "pagoda/core/buffer.h"
#include "pagoda/loader/model_weights.h"

namespace pagoda {

// Replaces `lm_head` (F32, F16 or BF16 [V, H]) by its FP8 form, whose storage is appended to `owned`. An lm_head
// that is already quantized is left as it is (returns false).
bool quantize_lm_head_fp8(Weight& lm_head, std::vector<HostTensor>& owned);

}  // namespace pagoda
