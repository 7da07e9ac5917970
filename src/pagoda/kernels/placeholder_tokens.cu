// fill_placeholder_tokens: one thread per input token, a grid-stride loop.
#include "pagoda/kernels/launch.cuh"
#include "pagoda/kernels/placeholder_tokens.h"

namespace pagoda::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 64;

__global__ void fill_placeholder_tokens_kernel(int32_t* token_ids, const int32_t* from_prev_sample,
                                               const int32_t* prev_sampled, int num_tokens) {
  pdl_grid_sync();  // the sampling kernel of the previous step must be done (launch.cuh)
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < num_tokens; t += gridDim.x * blockDim.x) {
    const int32_t row = from_prev_sample[t];
    if (row >= 0) token_ids[t] = prev_sampled[row];
  }
}

}  // namespace

void fill_placeholder_tokens(int32_t* token_ids, const int32_t* from_prev_sample, const int32_t* prev_sampled,
                             int num_tokens, cudaStream_t stream) {
  if (num_tokens <= 0) return;
  int blocks = (num_tokens + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  launch_kernel("fill_placeholder_tokens", fill_placeholder_tokens_kernel, dim3(blocks), dim3(kThreads), 0, stream,
                token_ids, from_prev_sample, prev_sampled, num_tokens);
}

}  // namespace pagoda::kernels
