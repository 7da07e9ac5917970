// The vocabulary as constrained decoding sees it: each token's bytes (what it adds to an output), sorted so
// that tokens sharing a prefix sit together, and a byte trie over that order. Built once per model and
// shared by every constrained request.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "pagoda/core/types.h"
#include "pagoda/structured/grammar.h"

namespace pagoda {
class Tokenizer;
}

namespace pagoda::structured {

class VocabIndex {
 public:
  // A trie node: the tokens with this node's prefix are sorted_ids()[lo, hi); those spelling exactly the
  // prefix come first, [lo, end_hi). Children are nodes()[first_child, first_child + num_children), by byte.
  struct Node {
    int32_t lo = 0, hi = 0, end_hi = 0;
    int32_t first_child = 0, num_children = 0;
    uint8_t byte = 0;
  };

  // token_bytes[id]: the bytes token id adds to an output; empty for tokens never allowed by a grammar
  // (special tokens, ids past the tokenizer). `num_logits` is the width of a logits row (may exceed the
  // tokenizer's vocabulary); `end_ids` are the tokens that end a generation (EOS).
  VocabIndex(std::vector<std::string> token_bytes, int num_logits, std::vector<TokenId> end_ids);

  // From a tokenizer: a token's bytes are what it adds after an ordinary token (so a SentencePiece "▁x"
  // keeps its space), broken UTF-8 kept as bytes; special tokens are left out.
  static std::shared_ptr<const VocabIndex> from_tokenizer(const Tokenizer& tokenizer, int num_logits,
                                                          std::vector<TokenId> end_ids);

  int num_logits() const { return num_logits_; }
  const std::vector<TokenId>& end_ids() const { return end_ids_; }
  const std::string& bytes(TokenId id) const { return bytes_[static_cast<size_t>(id)]; }
  const std::vector<TokenId>& sorted_ids() const { return sorted_; }
  // The ids below num_logits() without bytes (special tokens, ids past the tokenizer): never in the trie.
  const std::vector<TokenId>& textless_ids() const { return textless_; }
  const std::vector<Node>& nodes() const { return nodes_; }

  // Prefix counts over sorted_ids() of the tokens made only of whole UTF-8 characters in `set`:
  // counts[hi] - counts[lo] == hi - lo says every token of [lo, hi) is. Computed once per set and kept.
  std::shared_ptr<const std::vector<int32_t>> class_counts(const CharSet& set) const;

 private:
  int num_logits_;
  std::vector<TokenId> end_ids_;
  std::vector<std::string> bytes_;
  std::vector<TokenId> sorted_;  // the tokens with bytes, in byte order
  std::vector<TokenId> textless_;
  std::vector<Node> nodes_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, std::shared_ptr<const std::vector<int32_t>>> class_counts_;
};

}  // namespace pagoda::structured
