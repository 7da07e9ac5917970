// SamplingParams: how one request turns logits into tokens and when it stops. Field names and
// semantics follow vLLM's SamplingParams (and so the OpenAI API).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "pagoda/core/types.h"

namespace pagoda {

namespace structured {
struct CompiledConstraint;
}

// vLLM's allowed_token_ids and bad_words, applied before sampling (not to the logprobs reported). Shared by the
// copies of a request's parameters (its n choices, the runner's), which would otherwise each hold the lists.
struct TokenMasks {
  std::vector<TokenId> allowed;                  // ascending, each once; empty: every token
  std::vector<std::vector<TokenId>> bad_words;   // the server's encoding: where the output so far ends with all but a
                                                 // sequence's last token, that token is masked (a one-token one always)
};

struct SamplingParams {
  double temperature = 1.0;        // 0 (or below 1e-5) = greedy
  int top_k = 0;                   // <= 0: off (vLLM uses -1 for off; both accepted)
  double top_p = 1.0;              // (0, 1]
  double min_p = 0.0;              // [0, 1]: drop tokens with p < min_p * p_max
  std::optional<uint64_t> seed;    // per-request generator; unset: drawn from the engine's RNG
  double repetition_penalty = 1.0; // > 0; applies to prompt and output tokens (HF/vLLM semantics)
  double presence_penalty = 0.0;   // [-2, 2]; output tokens only (OpenAI semantics)
  double frequency_penalty = 0.0;  // [-2, 2]; output tokens only
  int max_tokens = 16;
  std::vector<TokenId> stop_token_ids;
  // OpenAI's logit_bias: added to the token's logit before penalties and sampling (not to the logprobs
  // reported, which stay the model's, as vLLM reports them). Ids ascending, each once; bias in [-100, 100].
  std::vector<std::pair<TokenId, float>> logit_bias;
  std::shared_ptr<const TokenMasks> token_masks;  // null: none
  bool ignore_eos = false;
  int logprobs = -1;         // top-k logprobs per generated token; -1 = none
  int prompt_logprobs = -1;  // top-k logprobs per prompt token; -1 = none
  // Constrained decoding (response_format, guided_*): tokens the grammar forbids are masked before
  // sampling. Shared by every request with the same constraint; null: unconstrained.
  std::shared_ptr<const structured::CompiledConstraint> constraint;

  bool is_greedy() const { return temperature < 1e-5; }
};

}  // namespace pagoda
