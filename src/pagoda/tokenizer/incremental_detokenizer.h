// IncrementalDetokenizer: turns a stream of generated token ids into text deltas that never end inside
// a UTF-8 character, using the prompt's last tokens as context so word-initial spaces survive (vLLM-style).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "pagoda/core/types.h"
#include "pagoda/tokenizer/tokenizer.h"

namespace pagoda {

class IncrementalDetokenizer {
 public:
  // `tokenizer` must outlive this object. Only the last few prompt ids are kept.
  IncrementalDetokenizer(const Tokenizer& tokenizer, std::span<const TokenId> prompt_ids, bool skip_special_tokens);

  // Adds one generated id; returns the text it completes (often "", e.g. mid-character).
  std::string push(TokenId id);
  // Flushes what is still held back (an incomplete character becomes U+FFFD). Call once at the end.
  std::string finish();
  // Everything emitted so far (the generated text only, never the prompt).
  const std::string& text() const { return text_; }

 private:
  std::string decode_range(size_t begin, size_t end) const;

  static constexpr size_t kContextTokens = kDecodeContextTokens;  // (tokenizer.h)

  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::vector<TokenId> ids_;  // prompt context + generated ids
  size_t prefix_offset_;      // start of the window decoded as context
  size_t read_offset_;        // ids before this are already emitted
  std::string text_;
};

}  // namespace pagoda
