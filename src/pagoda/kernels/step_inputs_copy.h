// A step's input arrays from pinned host memory to the device in one kernel (no copy-engine transfer in
// the stream), with async scheduling's placeholder tokens filled on the way from the previous step's
// samples.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pagoda::kernels {

// dst [words] = src [words], except placeholder token ids: for t < num_tokens with
// k = src[from_prev_offset + t] >= 0, dst[t] = prev_sampled[k]. src is pinned host memory (mapped: the
// kernel reads it over the bus; it must stay unchanged until the kernel is done), dst and prev_sampled
// are device memory. words and from_prev_offset multiples of 4, src and dst 16-byte aligned;
// prev_sampled == nullptr: a plain copy.
void copy_step_inputs(int32_t* dst, const int32_t* src, int64_t words, int num_tokens, int64_t from_prev_offset,
                      const int32_t* prev_sampled, cudaStream_t stream);

}  // namespace pagoda::kernels
