// copy_step_inputs: one 16-byte vector per thread. The host buffer is written by the host before the
// launch and by no kernel, so it is read before the PDL wait (launch.cuh): the bus round trip overlaps
// the kernel before (the previous step's sampling). The previous samples and dst only after the wait.
#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/launch.cuh"
#include "pagoda/kernels/step_inputs_copy.h"

namespace pagoda::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void copy_step_inputs_kernel(int4* dst, const int4* src, int64_t vectors, int num_tokens,
                                        int64_t from_prev_vector, const int32_t* prev_sampled) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool active = i < vectors;
  int4 v = active ? src[i] : make_int4(0, 0, 0, 0);
  const bool has_tokens = prev_sampled != nullptr && 4 * i < num_tokens;  // v holds token ids 4i .. 4i + 3
  const int4 rows = has_tokens ? src[from_prev_vector + i] : make_int4(-1, -1, -1, -1);
  pdl_grid_sync();  // the previous step's sampling is done; dst is free
  if (!active) return;
  if (has_tokens) {
    int* ids = reinterpret_cast<int*>(&v);
    const int row[4] = {rows.x, rows.y, rows.z, rows.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (4 * i + j < num_tokens && row[j] >= 0) ids[j] = prev_sampled[row[j]];
    }
  }
  dst[i] = v;
}

}  // namespace

void copy_step_inputs(int32_t* dst, const int32_t* src, int64_t words, int num_tokens, int64_t from_prev_offset,
                      const int32_t* prev_sampled, cudaStream_t stream) {
  if (words <= 0) return;
  const bool aligned = reinterpret_cast<uintptr_t>(dst) % 16 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0;
  if (words % 4 != 0 || !aligned || (prev_sampled != nullptr && (from_prev_offset < 0 || from_prev_offset % 4 != 0)))
    throw_cuda_error(cudaErrorInvalidValue, "copy_step_inputs: sizes or alignment not supported", __FILE__, __LINE__);
  const int64_t vectors = words / 4;
  launch_kernel("copy_step_inputs", copy_step_inputs_kernel, static_cast<unsigned>((vectors + kThreads - 1) / kThreads),
                kThreads, 0, stream, reinterpret_cast<int4*>(dst), reinterpret_cast<const int4*>(src), vectors,
                num_tokens, prev_sampled ? from_prev_offset / 4 : int64_t{0}, prev_sampled);
}

}  // namespace pagoda::kernels
