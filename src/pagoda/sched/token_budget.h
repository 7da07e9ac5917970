// TokenBudget: the token-packing rule of one step. Each scheduled sequence takes all its pending
// tokens or, when fewer are left, a chunk of them (chunked prefill falls out of this); with a chunk limit
// (--long-prefill-token-threshold), at most that many a step, and with a limit on long prefills
// (--max-long-partial-prefills) at most that many sequences with more pending tokens than the chunk limit get
// a chunk in one step: the others wait for a later step while shorter prompts go ahead of them. A tenant's
// prompt_tokens_per_step (tenant_kv.h) bounds the prompt chunks of its sequences together (a sequence with one
// token pending, a decode, is never held back by it).
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "pagoda/core/check.h"
#include "pagoda/sched/tenant_kv.h"

namespace pagoda {

class TokenBudget {
 public:
  // max_chunk: the most tokens one sequence takes a step (0: no limit but the budget's). max_long: the most
  // sequences a step with more than max_chunk pending tokens (0: no limit; only with a max_chunk).
  explicit TokenBudget(int max_tokens, int max_chunk = 0, int max_long = 0)
      : max_tokens_(max_tokens), max_chunk_(max_chunk), long_left_(max_chunk > 0 && max_long > 0 ? max_long : -1),
        num_left_(max_tokens) {}

  int num_left() const { return num_left_; }
  int num_used() const { return max_tokens_ - num_left_; }
  bool exhausted() const { return num_left_ == 0; }

  // Whether a sequence with `num_pending` uncomputed tokens is a long prefill (it needs more than one chunk).
  bool is_long(int num_pending) const { return max_chunk_ > 0 && num_pending > max_chunk_; }
  // Tokens a sequence of `tenant` (null: none) with `num_pending` uncomputed tokens gets this step: 0 when it is
  // long and the step holds as many long ones as it may, or when its tenant's prompt tokens for the step are spent.
  int chunk_for(int num_pending, const TenantKv* tenant = nullptr) const {
    if (long_left_ == 0 && is_long(num_pending)) return 0;
    const int tenant_left = num_pending > 1 ? tenant_prompt_left(tenant) : num_pending;
    return std::min({num_pending, num_left_, max_chunk_ > 0 ? max_chunk_ : num_pending, tenant_left});
  }
  // A chunk of num_tokens (> 0, from chunk_for) for a sequence of `tenant` with num_pending uncomputed tokens.
  void take(int num_tokens, int num_pending, const TenantKv* tenant = nullptr) {
    PAGODA_CHECK(num_tokens > 0 && num_tokens <= num_left_, "taking {} of {} tokens", num_tokens, num_left_);
    PAGODA_CHECK(long_left_ != 0 || !is_long(num_pending), "a long prefill past the step's limit");
    num_left_ -= num_tokens;
    if (long_left_ > 0 && is_long(num_pending)) --long_left_;
    if (num_pending > 1 && tenant != nullptr && tenant->prompt_tokens_per_step > 0) {
      PAGODA_CHECK(num_tokens <= tenant_prompt_left(tenant), "tenant '{}' past its prompt tokens for the step",
                   tenant->name);
      prompt_tokens_of(tenant->name) += num_tokens;
    }
  }

 private:
  int tenant_prompt_left(const TenantKv* tenant) const {
    if (tenant == nullptr || tenant->prompt_tokens_per_step <= 0) return num_left_;
    const auto it = std::find_if(tenant_prompt_.begin(), tenant_prompt_.end(),
                                 [&](const auto& e) { return e.first == tenant->name; });
    return tenant->prompt_tokens_per_step - (it == tenant_prompt_.end() ? 0 : it->second);
  }
  int& prompt_tokens_of(const std::string& name) {
    const auto it = std::find_if(tenant_prompt_.begin(), tenant_prompt_.end(), [&](const auto& e) { return e.first == name; });
    return it != tenant_prompt_.end() ? it->second : tenant_prompt_.emplace_back(name, 0).second;
  }

  int max_tokens_;
  int max_chunk_;
  int long_left_;  // long prefills the step may still take; -1: no limit
  int num_left_;
  std::vector<std::pair<std::string, int>> tenant_prompt_;  // prompt tokens taken this step by capped tenants
};

}  // namespace pagoda
