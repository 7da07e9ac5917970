// TokenBudget: the token-packing rule of one step. Each scheduled sequence takes all its pending
// tokens or, when fewer are left, a chunk of them (chunked prefill falls out of this); with a chunk limit
// (--long-prefill-token-threshold), at most that many a step.
#pragma once

#include <algorithm>

#include "pagoda/core/check.h"

namespace pagoda {

class TokenBudget {
 public:
  // max_chunk: the most tokens one sequence takes a step (0: no limit but the budget's).
  explicit TokenBudget(int max_tokens, int max_chunk = 0)
      : max_tokens_(max_tokens), max_chunk_(max_chunk), num_left_(max_tokens) {}

  int num_left() const { return num_left_; }
  int num_used() const { return max_tokens_ - num_left_; }
  bool exhausted() const { return num_left_ == 0; }

  // Tokens a sequence with `num_pending` uncomputed tokens gets this step.
  int chunk_for(int num_pending) const {
    return std::min({num_pending, num_left_, max_chunk_ > 0 ? max_chunk_ : num_pending});
  }
  void take(int num_tokens) {
    PAGODA_CHECK(num_tokens > 0 && num_tokens <= num_left_, "taking {} of {} tokens", num_tokens, num_left_);
    num_left_ -= num_tokens;
  }

 private:
  int max_tokens_;
  int max_chunk_;
  int num_left_;
};

}  // namespace pagoda
