// AddedTokenMatcher: finds added/special tokens written literally in the input (leftmost, longest first)
// and cuts the text around them, as HF's AddedVocabulary and llama.cpp's special-token partition do.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pagoda/core/types.h"

namespace pagoda {

struct AddedToken {
  TokenId id = -1;
  std::string content;
  bool special = false;      // matched only when parse_special; dropped by skip_special_tokens
  bool lstrip = false;       // swallows whitespace on its left
  bool rstrip = false;       // swallows whitespace on its right
  bool single_word = false;  // only matches when not inside a word
  bool normalized = false;   // HF: matched against normalized text (we match raw text; see .cpp)
};

struct TextSegment {
  std::string_view text;  // raw text to tokenize; empty for a matched token
  TokenId id = -1;        // >= 0: an added token
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  void split(std::string_view text, bool parse_special, std::vector<TextSegment>& out) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  std::vector<AddedToken> tokens_;
  std::vector<std::vector<uint32_t>> by_first_byte_;  // [256] token indices, longest first
};

}  // namespace pagoda
