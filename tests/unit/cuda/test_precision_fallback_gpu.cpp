// The precision fallback on the GPU: the fallback set is uploaded with the served set's embedding, norms and
// lm_head, and its decode steps replay CUDA graphs of their own. Pinned to the fallback (fp8 quantized at
// start-up), greedy outputs equal those of the compressed-tensors FP8 checkpoint the independent packer wrote,
// served alone, with graphs and eagerly; pinned back to the primary, those of the plain model.
#include <gtest/gtest.h>

#include "../model/golden_helpers.h"
#include "cuda_test_util.h"
#include "pagoda/engine/llm.h"

namespace pagoda {
namespace {

LlmOptions gpu(const std::string& model, const std::string& fallback, bool eager) {
  LlmOptions o{.load = {.model_path = testing::data_path("models/quant/" + model), .show_progress = false},
               .device = "cuda",
               .enforce_eager = eager,
               .max_num_seqs = 8,
               .max_num_batched_tokens = 512,
               .max_model_len = 512,
               .kv_cache_memory = int64_t{16} << 20,
               .seed = 5};
  o.fallback_quantization = fallback;
  o.fallback.tpot_target_s = 1.0;
  return o;
}

std::vector<std::vector<TokenId>> greedy(LLM& llm) {
  std::vector<GenerateRequest> reqs(4);
  for (int i = 0; i < 4; ++i) {
    reqs[i].prompt_ids = {1, static_cast<TokenId>(200 + 31 * i), 77, static_cast<TokenId>(1500 + i)};
    reqs[i].params.temperature = 0;
    reqs[i].params.ignore_eos = true;
    reqs[i].params.max_tokens = 24;
  }
  std::vector<std::vector<TokenId>> out;
  for (const CompletionOutput& c : llm.generate(reqs)) out.push_back(c.output_ids);
  return out;
}

TEST(PrecisionFallbackGpu, PinnedStepsComputeTheQuantizedCheckpoint) {
  PAGODA_SKIP_WITHOUT_GPU();
  for (bool eager : {false, true}) {
    LLM served(gpu("tinystories-656k", "fp8", eager));
    served.engine().pin_weights(WeightSet::kFallback);
    const auto on_fallback = greedy(served);
    EXPECT_GT(served.engine().stats().fallback_steps, 0u);
    served.engine().pin_weights(WeightSet::kPrimary);
    const auto on_primary = greedy(served);
    {
      LLM fp8(gpu("ct-fp8-dynamic", "", eager));
      EXPECT_EQ(on_fallback, greedy(fp8)) << "eager " << eager;
    }
    LLM plain(gpu("tinystories-656k", "", eager));
    EXPECT_EQ(on_primary, greedy(plain)) << "eager " << eager;
  }
}

}  // namespace
}  // namespace pagoda
