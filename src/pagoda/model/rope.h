// RoPE inverse frequencies from a model's RopeConfig (default and Llama-3 scaling), computed as HF
// transformers does so that logits match it.
#pragma once

#include "pagoda/backend/ops.h"
#include "pagoda/loader/model_config.h"

namespace pagoda {

RopeParams make_rope_params(const RopeConfig& rope, int head_dim);

}  // namespace pagoda
