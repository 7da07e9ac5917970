// Sampling one token from one row of logits on the CPU: penalties, temperature, top-k, top-p, min-p,
// then a draw from the request's own generator (so seeded requests reproduce alone or batched); and the
// top-k logprobs reported to users.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "pagoda/core/types.h"
#include "pagoda/runner/sampling_params.h"

namespace pagoda {

// The per-request random generator. Seeded requests construct it from their seed.
using SamplerRng = std::mt19937_64;

struct TokenLogprob {
  TokenId id;
  float logprob;
};

// Applies penalties in place: repetition_penalty to every token in prompt_ids or output_ids (positive
// logits divided, negative multiplied), presence/frequency penalties from counts in output_ids.
void apply_penalties(std::span<float> logits, const SamplingParams& params, std::span<const TokenId> prompt_ids,
                     std::span<const TokenId> output_ids);

// Masks (to -inf) what params.token_masks' allowed list leaves out and the bad-word tokens that would complete a bad
// word after output_ids, as vLLM's sampler does before its logits processors.
void apply_token_masks(std::span<float> logits, const SamplingParams& params, std::span<const TokenId> output_ids);

// Picks the next token from `logits` (modified in place): token masks, logit bias, penalties, then greedy argmax
// (lowest id wins ties) or temperature -> top-k -> top-p -> min-p -> a draw from `rng`.
TokenId sample_token(std::span<float> logits, const SamplingParams& params, std::span<const TokenId> prompt_ids,
                     std::span<const TokenId> output_ids, SamplerRng& rng);

// The k most likely tokens under log_softmax(logits) (raw model distribution, before penalties and
// temperature, as vLLM reports by default), most likely first, ties by lower id. When `include` is set and
// not among them, it is appended with its own logprob.
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int k, std::optional<TokenId> include = {});

}  // namespace pagoda
