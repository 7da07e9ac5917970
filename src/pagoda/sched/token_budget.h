// TokenBudget: the token-packing rule of one step. Each scheduled sequence takes all its pending
// tokens or, when fewer are left, a chunk of them (chunked prefill falls out of this).
#pragma once

#include <algorithm>

#include "pagoda/core/check.h"

namespace pagoda {

class TokenBudget {
 public:
  explicit TokenBudget(int max_tokens) : max_tokens_(max_tokens), num_left_(max_tokens) {}

  int num_left() const { return num_left_; }
  int num_used() const { return max_tokens_ - num_left_; }
  bool exhausted() const { return num_left_ == 0; }

  // Tokens a sequence with `num_pending` uncomputed tokens gets this step.
  int chunk_for(int num_pending) const { return std::min(num_pending, num_left_); }
  void take(int num_tokens) {
    PAGODA_CHECK(num_tokens > 0 && num_tokens <= num_left_, "taking {} of {} tokens", num_tokens, num_left_);
    num_left_ -= num_tokens;
  }

 private:
  int max_tokens_;
  int num_left_;
};

}  // namespace pagoda
