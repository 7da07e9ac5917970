// Moving weights out of the checkpoint's file mapping into process memory (huge pages where the kernel
// allows), for backends that compute from host memory: a private copy is not subject to page-cache
// reclaim between tokens.
#pragma once

#include "pagoda/loader/model_loader.h"

namespace pagoda {

// Copies every weight that points into a file mapping into an owned buffer and drops the mappings.
void copy_weights_into_memory(LoadedModel& model);

}  // namespace pagoda
