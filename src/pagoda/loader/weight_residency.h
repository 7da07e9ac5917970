// Moving weights out of the checkpoint's file mapping into process memory (huge pages where the kernel
// allows), for backends that compute from host memory: a private copy is not subject to page-cache
// reclaim between tokens.
#pragma once

#include <vector>

#include "pagoda/loader/model_loader.h"

namespace pagoda {

// Copies every weight that points into a file mapping into an owned buffer and drops the mappings.
void copy_weights_into_memory(LoadedModel& model);

// Frees every owned buffer that no tensor of model.weights or of `also_in_use` points into (after a backend
// replaced some arrays with forms of its own and model.weights was set to what it computes with). Returns the
// bytes freed.
int64_t release_unreferenced_storage(LoadedModel& model, const std::vector<const ModelWeights*>& also_in_use = {});

}  // namespace pagoda
