// Fp8Gemm: FP8 W8A8 products for many tokens through cuBLASLt (prefill, and decode batches past the GEMV):
// out [T, N] bf16 = (x codes [T, K] · weight codes [N, K]^T) scaled by the weight's row scales and the
// tokens' activation scales (fp8_gemm.cpp says where the scaling happens). The algorithm for each shape is
// chosen once by cuBLASLt's heuristic and kept.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>

#include "pagoda/kernels/fp8_linear.h"

namespace pagoda::cuda {

class Fp8Gemm {
 public:
  // `workspace` (of `workspace_bytes`) is shared with the stream's other GEMMs: stream order keeps them apart.
  Fp8Gemm(cudaStream_t stream, void* workspace, size_t workspace_bytes);
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;

  // Whether cuBLASLt has an algorithm for this shape on this GPU (compute capability 8.9 or newer).
  bool supported(int num_tokens, int n, int k);
  // scaled = false: out holds the unscaled sums, for a kernel that reads them to apply the scales
  // (kernels::ProductScales) instead of a pass of its own.
  void run(__nv_bfloat16* out, const kernels::Fp8Activations& x, const kernels::Fp8Rows& w, int num_tokens,
           bool scaled = true);

 private:
  struct Plan;
  const Plan* plan_for(int num_tokens, int n, int k);

  cudaStream_t stream_;
  void* workspace_;
  size_t workspace_bytes_;
  cublasLtHandle_t handle_ = nullptr;
  std::map<std::tuple<int, int, int>, Plan*> plans_;  // by (T, N, K); null: no algorithm
};

}  // namespace pagoda::cuda
