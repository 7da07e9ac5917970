// Generator: runs one request to completion on one backend: chunked prefill over a paged KV cache, then
// token-by-token decode with the CPU sampler, streaming each token. The continuous-batching engine
// replaces this for serving; the CLI's single-prompt `generate` uses it directly.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "pagoda/backend/ops.h"
#include "pagoda/model/llama_model.h"
#include "pagoda/runner/batch_builder.h"
#include "pagoda/runner/sampler.h"
#include "pagoda/runner/sampling_params.h"

namespace pagoda {

struct GeneratorOptions {
  int max_model_len = 0;  // 0: the model's max_position_embeddings
  int block_size = 16;
  int prefill_chunk = 512;  // prompt tokens per forward
};

enum class FinishReason { kStop, kLength };
std::string_view finish_reason_name(FinishReason reason);

struct GenerationOutput {
  std::vector<TokenId> output_ids;
  FinishReason finish_reason = FinishReason::kLength;
  // Per generated token: its top-`logprobs` entries (the sampled token added when missing).
  std::vector<std::vector<TokenLogprob>> logprobs;
  // Per prompt token (vLLM convention): entry 0 is empty (no distribution predicts it); entry i holds
  // the top-`prompt_logprobs` of the distribution after tokens 0..i-1, plus token i when missing.
  std::vector<std::vector<TokenLogprob>> prompt_logprobs;
};

class Generator {
 public:
  Generator(const LlamaModel& model, Ops& ops, const GeneratorOptions& options);

  int max_model_len() const { return max_model_len_; }

  // Throws InvalidRequest when the prompt is empty or does not fit in max_model_len.
  GenerationOutput generate(std::span<const TokenId> prompt_ids, const SamplingParams& params,
                            std::span<const TokenId> eos_token_ids,
                            const std::function<void(TokenId)>& on_token = {});

 private:
  void ensure_cache(int num_tokens);

  const LlamaModel& model_;
  Ops& ops_;
  GeneratorOptions options_;
  int max_model_len_;
  KvCache cache_;
  std::vector<int32_t> block_table_;
  BatchBuilder builder_;
};

}  // namespace pagoda
