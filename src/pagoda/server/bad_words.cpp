#include "pagoda/server/bad_words.h"

#include <algorithm>

#include "pagoda/tokenizer/tokenizer.h"

namespace pagoda::server {

std::vector<std::vector<TokenId>> encode_bad_words(const Tokenizer& tokenizer, const std::vector<std::string>& words) {
  const EncodeOptions plain{.add_special_tokens = false};
  std::vector<std::vector<TokenId>> sequences;
  for (const std::string& word : words) {
    const std::string bare = word.substr(std::min(word.size(), word.find_first_not_of(" \t\n\r")));
    std::vector<TokenId> alone = tokenizer.encode(bare, plain);
    if (alone.empty()) continue;
    std::vector<TokenId> spaced = tokenizer.encode(" " + bare, plain);
    const bool another_word = spaced.size() == alone.size() && spaced.front() != alone.front();
    sequences.push_back(std::move(alone));
    if (another_word) sequences.push_back(std::move(spaced));
  }
  return sequences;
}

}  // namespace pagoda::server
