// AWQ for one Llama layer, with AutoAWQ's groups (awq/models/llama.py get_layers_for_scaling):
//   q/k/v    after input_layernorm (its weight absorbs 1/s), inspected through the whole attention block
//   o_proj   after v_proj (v's rows absorb 1/s), only when v_proj and o_proj have the same shape (not GQA)
//   gate/up  after post_attention_layernorm, inspected through the whole MLP
//   down     after up_proj (up's rows absorb 1/s)
// All scales are searched on the unmodified layer, then applied (and the recorded inputs divided by them),
// then the clipping search runs on v/o/gate/up/down (AutoAWQ skips q and k).
#pragma once

#include <string>
#include <vector>

#include "pagoda/quantize/awq_search.h"
#include "pagoda/quantize/dense_layer.h"

namespace pagoda::quantizer {

struct GroupReport {
  std::string linears;  // "q_proj,k_proj,v_proj"
  double best_ratio = 0;
  double mse_rtn = 0;   // inspected output MSE, round-to-nearest
  double mse_awq = 0;   // ... with the searched scales (before clipping)
  bool searched = true; // false: o_proj skipped (GQA)
};

// Scales and clips `layer` in place (its linears are then ready for quantize_asym_groups); `inputs` are the
// layer's recorded inputs (divided by the scales as they are applied).
std::vector<GroupReport> awq_scale_and_clip_layer(DenseLayer& layer, const LayerShape& shape, const Batch& batch,
                                                  LayerInputs& inputs, const AwqSearchOptions& options);

}  // namespace pagoda::quantizer
