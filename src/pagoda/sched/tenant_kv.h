// TenantKv: what the scheduler and the KV pool know of a request's tenant (`--tenants-file`): its weight in
// LRU-K eviction and fair scheduling, a share of the pool guaranteed against other tenants, and a cap on what it
// may hold.
// Shares and caps are fractions of the pool (<= 1) or token counts (> 1); 0 means none.
//   cap:   a tenant's running sequences never hold more blocks than its cap: a waiting request of a tenant
//          at its cap waits (others are admitted past it), and a running one that would grow past it
//          preempts the tenant's own last sequence.
//   share: when blocks run short, sequences of tenants holding more than their share are preempted
//          before those of tenants within theirs.
// A sequence's blocks count for its tenant whether or not other sequences share them (prefix hits).
// prompt_tokens_per_step bounds what the tenant's prompts compute in one step, together (TokenBudget), so that
// a tenant sending long prompts never fills a step that another tenant's request then waits behind.
#pragma once

#include <string>

namespace pagoda {

struct TenantKv {
  std::string name;     // empty: no tenant, no quota
  float weight = 1.0f;  // in (0, inf): a larger weight keeps the tenant's cached blocks longer (LRU-K), and is a
                        // larger share of the engine under the fair policy (fair_share.h)
  double kv_share = 0;
  double kv_cap = 0;
  // Under the priority, slo and fair policies: ordered before each request's own priority (lower first), so a
  // tenant's requests never run ahead of a tenant at a lower value, whatever priority they ask for.
  int priority = 0;
  int prompt_tokens_per_step = 0;  // the most prompt tokens its requests compute in one step together; 0: no limit

  bool has_quota() const { return !name.empty() && (kv_share > 0 || kv_cap > 0); }
};

// The blocks of a pool of num_blocks blocks of block_size tokens that a share or cap stands for: a fraction
// of the blocks (rounded down), or a token count (rounded up to whole blocks); 0 for 0.
int tenant_quota_blocks(double amount, int num_blocks, int block_size);

// Checks a tenant's values (weight > 0, shares and caps >= 0, share <= cap when both are set); throws
// pagoda::Error naming `where`.
void validate(const TenantKv& tenant, const std::string& where);

}  // namespace pagoda
