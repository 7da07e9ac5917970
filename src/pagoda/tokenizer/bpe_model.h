// BpeModel: a BPE vocabulary and its merge rules, and the one merge algorithm every Pagoda BPE family
// uses: ranked merges (HF BPE, GGUF "gpt2") or score-ordered merges (GGUF "llama" SentencePiece).
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pagoda/core/types.h"

namespace pagoda {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIdMap = std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>>;

struct BpeOptions {
  bool byte_fallback = false;     // characters outside the vocabulary become <0xXX> tokens
  std::optional<TokenId> unk_id;  // otherwise they become unk (or are dropped when there is none)
  bool fuse_unk = false;          // consecutive unks collapse into one
  bool ignore_merges = false;     // a word that is itself a token is emitted whole (Llama-3)
};

class BpeModel {
 public:
  // `tokens[id]` is the text of token id; empty strings are holes and never match.
  BpeModel(std::vector<std::string> tokens, BpeOptions options);

  // Ranked merges: call in rank order (best first). Returns false when a token is unknown.
  [[nodiscard]] bool add_merge(std::string_view left, std::string_view right);
  // Score-ordered merges (SentencePiece): any adjacent pair whose concatenation is a token may merge,
  // the highest-scoring first. scores.size() must equal the number of tokens.
  void set_scores(std::vector<float> scores);

  std::optional<TokenId> token_id(std::string_view text) const;
  size_t num_tokens() const { return tokens_.size(); }
  size_t num_merges() const { return pair_merges_.size(); }

  // Appends the ids of one pre-tokenized word (already in the vocabulary's alphabet). Thread-safe;
  // results for short words are cached.
  void encode_word(std::string_view word, std::vector<TokenId>& out) const;

 private:
  struct PairMerge {
    uint32_t rank;
    TokenId merged;
  };
  void merge_word(std::string_view word, std::vector<TokenId>& out) const;
  void append_unknown(std::string_view text, bool& previous_unk, std::vector<TokenId>& out) const;

  std::vector<std::string> tokens_;
  std::unordered_map<std::string_view, TokenId> token_ids_;  // views into tokens_, which never changes
  BpeOptions options_;
  std::unordered_map<uint64_t, PairMerge> pair_merges_;
  std::vector<float> scores_;  // non-empty: score-ordered merges
  std::array<TokenId, 256> byte_tokens_;  // <0xXX> ids, -1 when absent

  static constexpr size_t kMaxCachedWordBytes = 64;
  static constexpr size_t kMaxCacheEntries = 1 << 16;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<TokenId>, StringHash, std::equal_to<>> cache_;
};

}  // namespace pagoda
