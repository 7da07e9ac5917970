// Placeholder input tokens (async scheduling): a step planned before the previous step's tokens reached
// the host reads those tokens on the device, from the buffer the sampling kernel wrote.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pagoda::kernels {

// For each token t < num_tokens with k = from_prev_sample[t] >= 0: token_ids[t] = prev_sampled[k]; others
// keep their id. token_ids, from_prev_sample [num_tokens] and prev_sampled [rows] live on the device.
void fill_placeholder_tokens(int32_t* token_ids, const int32_t* from_prev_sample, const int32_t* prev_sampled,
                             int num_tokens, cudaStream_t stream);

}  // namespace pagoda::kernels
