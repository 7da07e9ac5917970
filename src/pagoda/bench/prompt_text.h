// How synthetic prompts get real tokens and text. PromptTokenizer is the model's tokenizer as the
// benchmark reaches it (the server's /tokenize and /detokenize; a stand-in in tests). token_pool() draws
// its ids from a built-in English text, so random prompts are made of ordinary tokens, never special
// ones. exact_text() finds text that tokenizes to exactly the wanted number of tokens (for chat, whose
// prompts must be text).
#pragma once

#include <random>
#include <string>
#include <vector>

#include "pagoda/core/types.h"

namespace pagoda::bench {

class PromptTokenizer {
 public:
  virtual ~PromptTokenizer() = default;
  virtual std::vector<TokenId> encode(const std::string& text) = 0;  // no special tokens added
  virtual std::string decode(const std::vector<TokenId>& ids) = 0;
  // The tokens `text` costs as a prompt: encode(text).size(), or more for a chat template around it.
  virtual size_t count(const std::string& text) { return encode(text).size(); }
};

// The distinct ids of the built-in text, ascending. Throws pagoda::Error when it tokenizes to nothing.
std::vector<TokenId> token_pool(PromptTokenizer& tokenizer);

// Text that counts exactly ids.size() tokens (PromptTokenizer::count): decode(ids), re-encoded, with the tail
// cut or refilled from `pool` by the difference until the count matches (at most 16 rounds; then the
// closest). `*num_tokens`: its count.
std::string exact_text(PromptTokenizer& tokenizer, std::vector<TokenId> ids, const std::vector<TokenId>& pool,
                       std::mt19937_64& rng, int* num_tokens);

}  // namespace pagoda::bench
