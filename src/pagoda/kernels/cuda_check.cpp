// CUDA errors become pagoda::Error with the failing call and its place.
#include "pagoda/kernels/cuda_check.h"

#include <fmt/format.h>

#include "pagoda/core/error.h"

namespace pagoda::kernels {

void throw_cuda_error(cudaError_t status, const char* what, const char* file, int line) {
  throw Error(fmt::format("CUDA error {} ({}) in {} at {}:{}", cudaGetErrorName(status), cudaGetErrorString(status),
                          what, file, line));
}

}  // namespace pagoda::kernels
