// Fp8Gemm (fp8_gemm.h). cuBLASLt is column-major, so the row-major product out [T, N] = x [T, K] · W [N, K]^T
// is D [N, T] = op(A) [N, K] · B [K, T] with A = W viewed as [K, N] (ld K) transposed and B = x viewed as
// [K, T] (ld K): the "TN" layout FP8 GEMMs require. cuBLASLt 13 on sm_90 has no algorithm for outer-vector
// (per-row, per-token) scales (measured: the heuristic returns none), so the GEMM writes the unscaled sums
// in bf16 (at most 448^2 K: no overflow) and kernels::scale_fp8_products scales them in place, one more
// bf16 rounding (2^-9 relative) and one pass over the output. Where the output goes straight into a kernel of
// CudaOps's own (the gate-up's SwiGLU, the QKV's RoPE and cache store), run(..., scaled = false) leaves the sums
// unscaled and that kernel applies the scales as it reads them (kernels::ProductScales): no pass, no extra
// rounding (H100, FP8 Llama-3-8B offline 1,000 x 128/128: 18.7k -> 19.6k output tok/s; docs/PERFORMANCE.md).
#include "pagoda/backend/cuda/fp8_gemm.h"

#include <fmt/format.h>

#include "pagoda/core/env_knob.h"
#include "pagoda/core/error.h"

namespace pagoda::cuda {
namespace {

void check_lt(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw Error(fmt::format("cuBLASLt error {} in {}", cublasGetStatusString(status), what));
}

constexpr size_t kMaxPlans = 4096;  // shapes kept (prefill chunk sizes vary); past this the cache starts over

}  // namespace

struct Fp8Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (d) cublasLtMatrixLayoutDestroy(d);
  }
};

Fp8Gemm::Fp8Gemm(cudaStream_t stream, void* workspace, size_t workspace_bytes)
    : stream_(stream), workspace_(workspace), workspace_bytes_(workspace_bytes) {
  check_lt(cublasLtCreate(&handle_), "cublasLtCreate");
}

Fp8Gemm::~Fp8Gemm() {
  for (auto& [shape, plan] : plans_) delete plan;
  if (handle_) cublasLtDestroy(handle_);
}

const Fp8Gemm::Plan* Fp8Gemm::plan_for(int num_tokens, int n, int k) {
  const auto key = std::make_tuple(num_tokens, n, k);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  if (plans_.size() >= kMaxPlans) {
    for (auto& [shape, plan] : plans_) delete plan;
    plans_.clear();
  }
  auto* plan = new Plan;
  try {
    check_lt(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
    check_lt(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)), "TRANSA");
    check_lt(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)), "TRANSB");
    // Hopper's FP8 MMAs accumulate in fewer bits than fp32 unless the kernel promotes its sums to fp32 registers
    // every few K steps; "fast accumulation" skips the promotions. vLLM's FP8 GEMMs on sm_90 (CUTLASS's
    // ...PingpongFP8FastAccum schedules for per-token x per-channel scales) all skip them, and so does this one:
    // on an H100 it makes a 1,024-token FP8 prompt 1.10x faster and offline FP8 1.04x, for an error beyond the
    // rounding of at most 2.6e-4 of the sum of |products| (3.5e-5 with promotions) and +0.04% perplexity on the
    // trained FP8 checkpoint (docs/PERFORMANCE.md, 2026-12-06). PAGODA_FP8_FAST_ACCUM=0 keeps fp32 sums.
    static const int8_t fast_accum = env_flag("PAGODA_FP8_FAST_ACCUM", true) ? 1 : 0;
    check_lt(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum, sizeof(fast_accum)),
             "FAST_ACCUM");
    check_lt(cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_8F_E4M3, k, n, k), "layout A");
    check_lt(cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_8F_E4M3, k, num_tokens, k), "layout B");
    check_lt(cublasLtMatrixLayoutCreate(&plan->d, CUDA_R_16BF, n, num_tokens, n), "layout D");
    cublasLtMatmulPreference_t pref = nullptr;
    check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const uint64_t bytes = workspace_bytes_;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof(bytes));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->d, plan->d, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
      delete plan;
      plan = nullptr;
    } else {
      plan->algo = result.algo;
    }
  } catch (...) {
    delete plan;
    throw;
  }
  plans_.emplace(key, plan);
  return plan;
}

bool Fp8Gemm::supported(int num_tokens, int n, int k) {
  return num_tokens > 0 && k % 16 == 0 && n % 16 == 0 && plan_for(num_tokens, n, k) != nullptr;
}

void Fp8Gemm::run(__nv_bfloat16* out, const kernels::Fp8Activations& x, const kernels::Fp8Rows& w, int num_tokens,
                  bool scaled) {
  const Plan* plan = plan_for(num_tokens, w.n, w.k);
  if (plan == nullptr)
    throw Error(fmt::format("cuBLASLt has no FP8 GEMM for {} tokens x {} x {} on this GPU", num_tokens, w.n, w.k));
  const float alpha = 1.0f, beta = 0.0f;
  check_lt(cublasLtMatmul(handle_, plan->desc, &alpha, w.codes, plan->a, x.codes, plan->b, &beta, out, plan->d, out,
                          plan->d, &plan->algo, workspace_, workspace_bytes_, stream_),
           "cublasLtMatmul (FP8)");
  if (scaled) kernels::scale_fp8_products(out, w.scales, x.scales, num_tokens, w.n, stream_);
}

}  // namespace pagoda::cuda
