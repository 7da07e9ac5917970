// The BPE merge loop: symbols in a linked list over the word, candidate merges in a min-heap keyed by
// (priority, position); a popped candidate is stale when either side has changed since it was pushed.
#include "pagoda/tokenizer/bpe_model.h"

#include <fmt/format.h>

#include <queue>

#include "pagoda/core/check.h"
#include "pagoda/tokenizer/utf8.h"

namespace pagoda {

namespace {
uint64_t pair_key(TokenId left, TokenId right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct Symbol {
  int32_t prev, next;
  uint32_t begin, size;  // bytes of the word; size 0 once merged into its left neighbour
  TokenId id;            // -1 when the text is not a token
};

struct Candidate {
  double priority;  // lower merges first: the rank, or minus the score
  int32_t left, right;
  uint32_t size;  // left.size + right.size when pushed
  TokenId merged;
  bool operator>(const Candidate& o) const {
    return priority != o.priority ? priority > o.priority : left > o.left;
  }
};
}  // namespace

BpeModel::BpeModel(std::vector<std::string> tokens, BpeOptions options)
    : tokens_(std::move(tokens)), options_(options) {
  token_ids_.reserve(tokens_.size());
  for (size_t id = 0; id < tokens_.size(); ++id) {
    if (!tokens_[id].empty()) token_ids_.emplace(tokens_[id], static_cast<TokenId>(id));  // first id wins
  }
  for (int b = 0; b < 256; ++b) {
    auto id = token_id(fmt::format("<0x{:02X}>", b));
    byte_tokens_[b] = id ? *id : -1;
  }
}

bool BpeModel::add_merge(std::string_view left, std::string_view right) {
  auto l = token_id(left), r = token_id(right);
  std::string joined;
  joined.reserve(left.size() + right.size());
  joined.append(left).append(right);
  auto m = token_id(joined);
  if (!l || !r || !m) return false;
  // A repeated pair keeps its first (best) rank, as HF does.
  pair_merges_.try_emplace(pair_key(*l, *r), PairMerge{static_cast<uint32_t>(pair_merges_.size()), *m});
  return true;
}

void BpeModel::set_scores(std::vector<float> scores) {
  PAGODA_CHECK(scores.size() == tokens_.size(), "{} scores for {} tokens", scores.size(), tokens_.size());
  scores_ = std::move(scores);
}

std::optional<TokenId> BpeModel::token_id(std::string_view text) const {
  auto it = token_ids_.find(text);
  if (it == token_ids_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::encode_word(std::string_view word, std::vector<TokenId>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (auto id = token_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t first = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::vector<TokenId> ids(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();  // bounded: start over rather than track LRU
    cache_.emplace(std::string(word), std::move(ids));
  }
}

void BpeModel::merge_word(std::string_view word, std::vector<TokenId>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (size_t i = 0; i < word.size();) {
    size_t n = utf8::char_length(word, i);
    auto id = token_id(word.substr(i, n));
    int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, index + 1, static_cast<uint32_t>(i), static_cast<uint32_t>(n), id ? *id : -1});
    i += n;
  }
  symbols.back().next = -1;

  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& a = symbols[left];
    const Symbol& b = symbols[right];
    if (scores_.empty()) {
      if (a.id < 0 || b.id < 0) return;
      auto it = pair_merges_.find(pair_key(a.id, b.id));
      if (it == pair_merges_.end()) return;
      queue.push({static_cast<double>(it->second.rank), left, right, a.size + b.size, it->second.merged});
    } else {
      auto id = token_id(word.substr(a.begin, a.size + b.size));
      if (!id) return;
      queue.push({-static_cast<double>(scores_[*id]), left, right, a.size + b.size, *id});
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i, i + 1);

  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    Symbol& a = symbols[c.left];
    Symbol& b = symbols[c.right];
    if (a.size == 0 || b.size == 0 || a.next != c.right || a.size + b.size != c.size) continue;  // stale
    a.size += b.size;
    a.id = c.merged;
    b.size = 0;
    a.next = b.next;
    if (b.next >= 0) symbols[b.next].prev = c.left;
    consider(a.prev, c.left);
    consider(c.left, a.next);
  }

  bool previous_unk = false;
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    if (s.id >= 0) {
      out.push_back(s.id);
      previous_unk = false;
    } else {
      append_unknown(word.substr(s.begin, s.size), previous_unk, out);
    }
  }
}

void BpeModel::append_unknown(std::string_view text, bool& previous_unk, std::vector<TokenId>& out) const {
  if (options_.byte_fallback) {
    bool all = true;
    for (char c : text) all = all && byte_tokens_[static_cast<uint8_t>(c)] >= 0;
    if (all) {
      for (char c : text) out.push_back(byte_tokens_[static_cast<uint8_t>(c)]);
      previous_unk = false;
      return;
    }
  }
  if (!options_.unk_id) return;
  if (!(options_.fuse_unk && previous_unk)) out.push_back(*options_.unk_id);
  previous_unk = true;
}

}  // namespace pagoda
