// Random weights of a config's shapes, for speed runs without a checkpoint (LoadFormat::kDummy).
#pragma once

#include <cstdint>

#include "pagoda/loader/dummy_quant_weights.h"
#include "pagoda/loader/model_loader.h"

namespace pagoda {

// Fills model.weights (storage in model.owned) for model.config in model.config.dtype (F32, F16 or BF16):
// matrices ~N(0, 0.02), norms 1.0; with a `quant` scheme, each decoder linear in that form instead (values
// ~N(0, 0.02) once dequantized). Deterministic for a given seed, whatever the thread count; the weights
// left in the config dtype are the same with or without `quant`.
void make_dummy_weights(LoadedModel& model, const DummyQuant& quant, uint64_t seed, bool show_progress);

}  // namespace pagoda
