// Added-token splitting (see added_tokens.h). Tokens marked `normalized` are matched against the raw
// text: the vocabularies Pagoda loads (Llama-3, Llama-2, Mistral) only have normalized=false tokens,
// and for them both are the same.
#include "pagoda/tokenizer/added_tokens.h"

#include <algorithm>

namespace pagoda {

namespace {
bool is_word_byte(char c) {
  auto u = static_cast<unsigned char>(c);
  return (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || c == '_' || u >= 0x80;
}
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens)
    : tokens_(std::move(tokens)), by_first_byte_(256) {
  for (uint32_t i = 0; i < tokens_.size(); ++i) {
    if (!tokens_[i].content.empty()) by_first_byte_[static_cast<uint8_t>(tokens_[i].content[0])].push_back(i);
  }
  for (auto& bucket : by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(),
                     [&](uint32_t a, uint32_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
  }
}

void AddedTokenMatcher::split(std::string_view text, bool parse_special, std::vector<TextSegment>& out) const {
  if (tokens_.empty()) {
    if (!text.empty()) out.push_back({text, -1});
    return;
  }
  size_t segment_begin = 0;  // start of the raw text not yet emitted
  size_t i = 0;
  while (i < text.size()) {
    const AddedToken* found = nullptr;
    for (uint32_t index : by_first_byte_[static_cast<uint8_t>(text[i])]) {
      const AddedToken& t = tokens_[index];
      if (t.special && !parse_special) continue;
      if (text.compare(i, t.content.size(), t.content) != 0) continue;
      if (t.single_word) {
        bool left_ok = i == 0 || !is_word_byte(text[i - 1]);
        size_t end = i + t.content.size();
        bool right_ok = end == text.size() || !is_word_byte(text[end]);
        if (!left_ok || !right_ok) continue;
      }
      found = &t;
      break;
    }
    if (found == nullptr) {
      ++i;
      continue;
    }
    size_t begin = i, end = i + found->content.size();
    if (found->lstrip) {
      while (begin > segment_begin && is_space(text[begin - 1])) --begin;
    }
    if (found->rstrip) {
      while (end < text.size() && is_space(text[end])) ++end;
    }
    if (begin > segment_begin) out.push_back({text.substr(segment_begin, begin - segment_begin), -1});
    out.push_back({{}, found->id});
    segment_begin = i = end;
  }
  if (segment_begin < text.size()) out.push_back({text.substr(segment_begin), -1});
}

}  // namespace pagoda
