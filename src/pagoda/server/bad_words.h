// vLLM's `bad_words` request field: words the output must not contain, encoded once per request into the token
// sequences the sampler masks (TokenMasks::bad_words).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "pagoda/core/types.h"

namespace pagoda {
class Tokenizer;
}

namespace pagoda::server {

// A request's bound (vLLM has none): every sequence is compared with the output's tail at each step.
inline constexpr size_t kMaxBadWords = 1024;
inline constexpr size_t kMaxBadWordBytes = 256;

// As vLLM's SamplingParams.update_from_tokenizer: each word without its leading spaces, encoded without special
// tokens; then " " + that word, kept too where it encodes to as many tokens with another first token (the word in
// the middle of a sentence).
std::vector<std::vector<TokenId>> encode_bad_words(const Tokenizer& tokenizer, const std::vector<std::string>& words);

}  // namespace pagoda::server
