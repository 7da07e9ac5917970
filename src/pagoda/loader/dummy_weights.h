// Random weights of a config's shapes, for speed runs without a checkpoint (LoadFormat::kDummy).
#pragma once

#include <cstdint>

#include "pagoda/loader/model_loader.h"

namespace pagoda {

// Fills model.weights (storage in model.owned) for model.config in model.config.dtype (F32, F16 or BF16):
// matrices ~N(0, 0.02), norms 1.0. Deterministic for a given seed, whatever the thread count.
void make_dummy_weights(LoadedModel& model, uint64_t seed, bool show_progress);

}  // namespace pagoda
