// Error checking for CUDA calls and kernel launches. Every runtime call and every launch goes through
// these; a failure throws pagoda::Error naming the call, file and line (implemented in cuda_check.cpp so
// that .cu files need no C++20 headers).
#pragma once

#include <cuda_runtime.h>

namespace pagoda::kernels {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* what, const char* file, int line);

inline void cuda_check(cudaError_t status, const char* what, const char* file, int line) {
  if (status != cudaSuccess) throw_cuda_error(status, what, file, line);
}

}  // namespace pagoda::kernels

#define PAGODA_CUDA_CHECK(expr) ::pagoda::kernels::cuda_check((expr), #expr, __FILE__, __LINE__)
// After every <<<...>>>: catches bad launch configurations at once (asynchronous faults surface at the
// next synchronising call).
#define PAGODA_CUDA_CHECK_LAUNCH(name) ::pagoda::kernels::cuda_check(cudaGetLastError(), name, __FILE__, __LINE__)
