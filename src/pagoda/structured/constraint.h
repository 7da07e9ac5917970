// An output constraint ready to run: a grammar matched against one vocabulary (CompiledConstraint, shared by
// every request with the same constraint), and the per-request matcher that says which tokens may come
// next and moves past the sampled one.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "pagoda/core/types.h"
#include "pagoda/structured/grammar.h"
#include "pagoda/structured/pushdown.h"
#include "pagoda/structured/vocab_index.h"

namespace pagoda::structured {

struct CompiledConstraint {
  // A loop set of the grammar with the vocabulary's counts for it (VocabIndex::class_counts), and for each
  // char set of the grammar whether it holds the loop set whole (1), none of it (0) or part of it (-1).
  struct LoopClass {
    int32_t set = 0;
    std::shared_ptr<const std::vector<int32_t>> counts;
    std::vector<int8_t> relation;
  };

  Grammar grammar;
  std::shared_ptr<const VocabIndex> vocab;
  std::vector<LoopClass> loop_classes;
  std::string description;  // what it came from, for logs ("json_schema", "regex", ...)
  // The work each mask, accepted token and the start may cost (pushdown.h); past it the output ends.
  ExpansionLimits limits;

  // Masks already computed, by the stacks they were computed for (ConstraintMatcher::state_key): a JSON
  // output returns to the same few states (inside a string, after a comma) again and again, across
  // requests too. At most kMaxCachedMasks (16 KiB each for a 128k vocabulary); cleared when full.
  static constexpr size_t kMaxCachedMasks = 64;
  struct MaskCache {
    std::mutex mutex;
    std::unordered_map<std::string, std::shared_ptr<const std::vector<uint64_t>>> masks;
  };
  mutable MaskCache mask_cache;
};

// Refuses (InvalidRequest) a grammar whose start alone exceeds `limits`. The server keeps the default limits;
// the fuzz target lowers them, so that work the budget bounds by design is cut short instead of reported as a
// timeout (under ASan a frame takes about 2 us, so a default mask's 20M take 40 s), and only unbounded work is.
std::shared_ptr<const CompiledConstraint> compile_constraint(Grammar grammar, std::shared_ptr<const VocabIndex> vocab,
                                                             std::string description, ExpansionLimits limits = {});

class ConstraintMatcher {
 public:
  explicit ConstraintMatcher(std::shared_ptr<const CompiledConstraint> constraint);

  // The tokens that may come next, one bit per token id (VocabIndex::num_logits() bits): every token whose
  // bytes keep the output a prefix of something the grammar accepts, and the end tokens once the output is
  // complete. When nothing would be allowed (the vocabulary cannot spell what the grammar needs), the end
  // tokens are, so that the request ends instead of sampling from nothing.
  const std::vector<uint64_t>& allowed_tokens();
  // Sets every forbidden token's logit to -infinity. `logits` is one row of num_logits() values.
  void mask_logits(std::span<float> logits);
  // Moves past a sampled token; false (and no change) when the grammar forbids it. End tokens are accepted
  // when the output is complete.
  bool accept(TokenId id);
  // Whether the output so far is a whole sentence of the grammar.
  bool complete() const { return stacks_.complete && !cursor_.pending(); }
  // Why the output was ended early: a grammar so ambiguous that over kMaxStacks parses were alive at once,
  // or a mask too costly to compute (then only the end tokens are offered). Empty otherwise.
  const std::string& error() const { return error_; }
  // Moves past raw output bytes (tests feed text without a tokenizer); false and no change when forbidden.
  bool accept_bytes(std::string_view bytes) { return advance(bytes, /*commit=*/true); }
  // Whether the grammar takes this token now, checked alone (no trie walk): the reference the token mask
  // is tested against.
  bool allows(TokenId id);

 private:
  std::shared_ptr<const CompiledConstraint> c_;
  StackArena arena_;
  StackSet stacks_;
  Utf8Cursor cursor_;  // a character a token left unfinished
  // The mask as the trie walk leaves it: one bit per position of VocabIndex::sorted_ids(), and whether the
  // end tokens are allowed. allowed_ (by id) is made from it only when asked for.
  std::shared_ptr<const std::vector<uint64_t>> sorted_mask_;
  bool ends_allowed_ = false;
  bool mask_fresh_ = false;
  std::vector<uint64_t> allowed_;
  bool allowed_fresh_ = false;
  std::vector<std::pair<TokenId, float>> kept_;  // mask_logits' scratch

  void compute_mask();
  // The stacks as text: each stack's positions from its top down, the stacks sorted; empty while a
  // character is pending (such states are not cached).
  std::string state_key() const;

  bool advance(std::string_view bytes, bool commit);
  bool advance_or_throw(std::string_view bytes, bool commit);
  std::string error_;
  void compact_arena();
};

}  // namespace pagoda::structured
