// Token sampling on the device, one row of logits per sequence: greedy (argmax, lowest id on ties) or
// temperature with top-k / top-p / min-p filters, drawn with the Gumbel-max trick from a counter-based
// generator (Philox) keyed by (seed, offset). A request's draw therefore depends only on its own seed and
// how many tokens it has sampled, never on the batch it ran in. Penalties, logit bias and logprobs stay
// on the CPU sampler (runner/sampler.h); the runner sends such rows there.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace pagoda::kernels {

constexpr float kGreedyTemperatureBelow = 1e-5f;  // SamplingParams::is_greedy

struct SamplingRow {
  float temperature = 0.0f;  // < kGreedyTemperatureBelow: greedy, and no other field matters
  int32_t top_k = 0;         // <= 0: off
  float top_p = 1.0f;        // >= 1: off
  float min_p = 0.0f;        // <= 0: off
  uint64_t seed = 0;
  uint64_t offset = 0;  // tokens this request has sampled so far
};

size_t sampling_workspace_bytes(int num_rows, int vocab);

// out_tokens [rows] (device) from logits [rows, vocab]; rows [rows] lives on the device. Filters apply to
// the temperature-scaled distribution in the CPU sampler's order: top-k, then top-p (the smallest set of
// most likely tokens whose probability reaches top_p), then min-p (tokens below min_p * p_max dropped).
void sample_tokens(int32_t* out_tokens, const __nv_bfloat16* logits, const SamplingRow* rows, int num_rows, int vocab,
                   void* workspace, cudaStream_t stream);

}  // namespace pagoda::kernels
