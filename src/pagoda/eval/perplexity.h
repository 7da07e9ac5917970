// Perplexity in the convention of llama.cpp's `llama-perplexity`: the text's tokens are cut into consecutive
// chunks of ctx_size tokens (the remainder dropped), each chunk's first token is replaced by BOS, and only the
// second half of each chunk is scored, so that every scored token has at least ctx_size/2 tokens of context:
// for i in [ctx_size/2, ctx_size - 1), the negative log-probability of token i+1 given tokens 0..i.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "pagoda/core/types.h"

namespace pagoda {

// The first position of a chunk whose token is scored: llama.cpp's `first = n_ctx/2` is the logits row, which
// predicts the token after it.
int first_scored_position(int ctx_size);
// Tokens scored per chunk (llama.cpp's n_ctx - 1 - first): 255 for 512.
int tokens_scored_per_chunk(int ctx_size);

// Consecutive ctx_size-token chunks of `tokens`, at most `max_chunks` of them (<= 0: all), the remainder
// dropped; each chunk's first token becomes `bos` when there is one (llama.cpp: models that add BOS).
std::vector<std::vector<TokenId>> perplexity_chunks(std::span<const TokenId> tokens, int ctx_size, int max_chunks,
                                                    std::optional<TokenId> bos);

struct PerplexityStats {
  int64_t tokens_scored = 0;
  double nll_mean = 0.0;
  double nll_stderr = 0.0;         // llama.cpp's: sqrt((mean(nll^2) - mean(nll)^2) / (N - 1)); 0 when N < 2
  double perplexity = 0.0;         // exp(nll_mean)
  double perplexity_stderr = 0.0;  // perplexity * nll_stderr, as llama.cpp prints "PPL +/- ..."
};

// Sums of the scored tokens' negative log-likelihoods (in double, as llama.cpp keeps them) and their statistics.
class NllAccumulator {
 public:
  void add(double nll);
  PerplexityStats stats() const;

 private:
  int64_t count_ = 0;
  double sum_ = 0.0;
  double sum_squares_ = 0.0;
};

}  // namespace pagoda
