// Incremental detokenization: decode(context + new) minus decode(context), emitted only when it does not
// end in U+FFFD, i.e. when the tail is not a character still waiting for its remaining bytes.
#include "pagoda/tokenizer/incremental_detokenizer.h"

#include <algorithm>

#include "pagoda/tokenizer/utf8.h"

namespace pagoda {

namespace {
// Where the new decode stops repeating the context's decode. Usually that is all of the context text;
// when the context ends inside a character (a prompt cut mid-character decodes to U+FFFD), the new
// decode completes that character instead, and the delta starts at the character's first byte.
size_t delta_start(const std::string& prefix_text, const std::string& new_text) {
  if (new_text.starts_with(prefix_text)) return prefix_text.size();
  size_t n = 0;
  while (n < prefix_text.size() && n < new_text.size() && prefix_text[n] == new_text[n]) ++n;
  while (n > 0 && n < new_text.size() && (static_cast<uint8_t>(new_text[n]) & 0xC0) == 0x80) --n;
  return n;
}
}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, std::span<const TokenId> prompt_ids,
                                               bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {
  size_t keep = std::min(prompt_ids.size(), kContextTokens);
  ids_.assign(prompt_ids.end() - static_cast<std::ptrdiff_t>(keep), prompt_ids.end());
  prefix_offset_ = 0;
  read_offset_ = ids_.size();
}

std::string IncrementalDetokenizer::decode_range(size_t begin, size_t end) const {
  return tokenizer_.decode(std::span<const TokenId>(ids_).subspan(begin, end - begin), skip_special_tokens_);
}

std::string IncrementalDetokenizer::push(TokenId id) {
  ids_.push_back(id);
  std::string prefix_text = decode_range(prefix_offset_, read_offset_);
  std::string new_text = decode_range(prefix_offset_, ids_.size());
  size_t start = delta_start(prefix_text, new_text);
  if (new_text.size() <= start || new_text.ends_with(utf8::kReplacementChar)) return {};
  std::string delta = new_text.substr(start);
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  // Drop ids no window will look at again, so a long generation does not grow this vector.
  if (prefix_offset_ > 4 * kContextTokens) {
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_offset_));
    read_offset_ -= prefix_offset_;
    prefix_offset_ = 0;
  }
  text_ += delta;
  return delta;
}

std::string IncrementalDetokenizer::finish() {
  if (read_offset_ == ids_.size()) return {};
  std::string prefix_text = decode_range(prefix_offset_, read_offset_);
  std::string new_text = decode_range(prefix_offset_, ids_.size());
  prefix_offset_ = read_offset_ = ids_.size();
  size_t start = delta_start(prefix_text, new_text);
  if (new_text.size() <= start) return {};
  std::string delta = new_text.substr(start);
  text_ += delta;
  return delta;
}

}  // namespace pagoda
