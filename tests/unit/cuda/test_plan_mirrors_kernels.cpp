// `pagoda plan` (plan/throughput_model.h) copies the token limits at which the CUDA backend changes kernels, since
// it builds without CUDA. These compile-time checks fail the cuda build (CI builds it) when a kernel's limit moves and
// the plan's copy does not; there is nothing to run.
#include "pagoda/kernels/fp8_linear.h"
#include "pagoda/kernels/gemv.h"
#include "pagoda/kernels/quant_gemm.h"
#include "pagoda/kernels/quant_gemv.h"
#include "pagoda/kernels/quant_gemv_few_tokens.h"
#include "pagoda/plan/throughput_model.h"

namespace pagoda {

static_assert(plan::kSkinnyMaxTokens == kernels::kSkinnyGemmMaxTokens);
static_assert(plan::kQuantGemvMaxTokens == kernels::kQuantGemvMaxTokens);
static_assert(plan::kQuantGemvFewTokensMax == kernels::kQuantGemvFewTokensMax);
static_assert(plan::kQuantGemmMaxTokens == kernels::kQuantGemmMaxTokens);
static_assert(plan::kQuantGemmWgmmaMinTokens == kernels::kQuantGemmWgmmaMinTokens);
static_assert(plan::kQuantGemmWgmmaMaxTokens == kernels::kQuantGemmWgmmaMaxTokens);
static_assert(plan::kFp8GemvMaxTokens == kernels::kFp8GemvMaxTokens);

}  // namespace pagoda
