// VocabIndex (vocab_index.h).
#include "pagoda/structured/vocab_index.h"

#include <algorithm>

#include "pagoda/structured/pushdown.h"
#include "pagoda/tokenizer/tokenizer.h"

namespace pagoda::structured {

VocabIndex::VocabIndex(std::vector<std::string> token_bytes, int num_logits, std::vector<TokenId> end_ids)
    : num_logits_(num_logits), end_ids_(std::move(end_ids)), bytes_(std::move(token_bytes)) {
  bytes_.resize(static_cast<size_t>(num_logits_));
  for (TokenId id = 0; id < num_logits_; ++id)
    (bytes_[static_cast<size_t>(id)].empty() ? textless_ : sorted_).push_back(id);
  std::sort(sorted_.begin(), sorted_.end(), [&](TokenId a, TokenId b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)];
  });
  // Breadth-first, so that each node's children are contiguous: a node at depth d covering [lo, hi) has the
  // tokens of length d first, then one child per distinct byte at index d.
  nodes_.push_back({0, static_cast<int32_t>(sorted_.size()), 0, 0, 0, 0});
  std::vector<std::pair<int32_t, size_t>> frontier{{0, 0}};  // (node, depth)
  while (!frontier.empty()) {
    std::vector<std::pair<int32_t, size_t>> next;
    for (const auto& [index, depth] : frontier) {
      int32_t i = nodes_[static_cast<size_t>(index)].lo;
      const int32_t hi = nodes_[static_cast<size_t>(index)].hi;
      while (i < hi && bytes_[static_cast<size_t>(sorted_[static_cast<size_t>(i)])].size() == depth) ++i;
      nodes_[static_cast<size_t>(index)].end_hi = i;
      nodes_[static_cast<size_t>(index)].first_child = static_cast<int32_t>(nodes_.size());
      int32_t count = 0;
      while (i < hi) {
        const auto byte = static_cast<uint8_t>(bytes_[static_cast<size_t>(sorted_[static_cast<size_t>(i)])][depth]);
        int32_t j = i;
        while (j < hi && static_cast<uint8_t>(bytes_[static_cast<size_t>(sorted_[static_cast<size_t>(j)])][depth]) == byte) ++j;
        nodes_.push_back({i, j, i, 0, 0, byte});
        next.push_back({static_cast<int32_t>(nodes_.size()) - 1, depth + 1});
        ++count;
        i = j;
      }
      nodes_[static_cast<size_t>(index)].num_children = count;
    }
    frontier = std::move(next);
  }
}

std::shared_ptr<const VocabIndex> VocabIndex::from_tokenizer(const Tokenizer& tokenizer, int num_logits,
                                                             std::vector<TokenId> end_ids) {
  // An ordinary token to stand before each one: the last id of "a".
  const std::vector<TokenId> a = tokenizer.encode("a", EncodeOptions{.add_special_tokens = false, .parse_special = false});
  std::vector<TokenId> context;
  if (!a.empty()) context.push_back(a.back());
  const std::string prefix = tokenizer.decode_bytes(context);
  std::vector<std::string> bytes(static_cast<size_t>(num_logits));
  std::vector<TokenId> ids = context;
  ids.push_back(0);
  const int n = std::min(num_logits, tokenizer.vocab_size());
  for (TokenId id = 0; id < n; ++id) {
    if (tokenizer.is_special(id)) continue;
    ids.back() = id;
    std::string text = tokenizer.decode_bytes(ids);
    bytes[static_cast<size_t>(id)] = text.compare(0, prefix.size(), prefix) == 0 ? text.substr(prefix.size())
                                                                                : tokenizer.decode_bytes(std::span(&id, 1));
  }
  return std::make_shared<const VocabIndex>(std::move(bytes), num_logits, std::move(end_ids));
}

std::shared_ptr<const std::vector<int32_t>> VocabIndex::class_counts(const CharSet& set) const {
  const std::string key = set.key();
  {
    std::lock_guard lock(mutex_);
    const auto it = class_counts_.find(key);
    if (it != class_counts_.end()) return it->second;
  }
  auto counts = std::make_shared<std::vector<int32_t>>(sorted_.size() + 1, 0);
  for (size_t i = 0; i < sorted_.size(); ++i) {
    bool inside = true;
    Utf8Cursor cursor;
    for (char c : bytes_[static_cast<size_t>(sorted_[i])]) {
      const Utf8Cursor::Step step = cursor.step(static_cast<uint8_t>(c));
      if (step == Utf8Cursor::Step::kInvalid || (step == Utf8Cursor::Step::kComplete && !set.contains(cursor.code_point()))) {
        inside = false;
        break;
      }
    }
    inside = inside && !cursor.pending();
    (*counts)[i + 1] = (*counts)[i] + (inside ? 1 : 0);
  }
  std::lock_guard lock(mutex_);
  if (class_counts_.size() < 256) class_counts_.emplace(key, counts);  // bounded: sets come from requests
  return counts;
}

}  // namespace pagoda::structured
