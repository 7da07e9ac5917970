// `--dataset multi-tenant`: a workload that tells KV-pool policies apart (issue 16: tenant weights and
// quotas, LRU-K eviction, a host KV tier). The tenants are those of tenants.h:
//   ordinary: each has its own system prompt (--prefix-len tokens, distinct per tenant) followed by a random
//             suffix (--random-input-len +- --random-range-ratio); which tenant sends a request is drawn
//             from a Zipf popularity with exponent s over their ranks (tenant-0 the most popular);
//   noisy:    a share of the requests, each a unique long prompt (no shared prefix): it floods the cache;
//   periodic: its own system prompt + suffix, at fixed times 0, T, 2T, ... (a prefix worth keeping that
//             plain LRU forgets between visits).
// Ordinary and noisy requests take the times of the arrival process (--request-rate, --burstiness or
// --request-rate-schedule); the periodic ones are merged into that timeline. Seeded, deterministic.
#pragma once

#include <vector>

#include "pagoda/bench/dataset.h"
#include "pagoda/bench/tenants.h"
#include "pagoda/core/types.h"

namespace pagoda::bench {

struct MultiTenantOptions {
  int num_tenants = 8;                // ordinary tenants
  double zipf_s = 1.0;                // P(ordinary tenant of rank k) ~ 1 / (k + 1)^s; 0: uniform
  double periodic_interval_ms = 200;  // T: the periodic tenant's requests at 0, T, 2T, ... (ms)
  int periodic_requests = 0;          // 0: one per T within the other requests' arrival span (at least 1)
  double noisy_share = 0.2;           // of --num-prompts, the noisy tenant's, in [0, 1)
  int noisy_input_len = 0;            // tokens of a noisy prompt; 0: 2 * (--prefix-len + --random-input-len)
  int noisy_prompt_tokens_per_step = 0;  // the tenants file's bound on the noisy tenant's prompt tokens a step
  double noisy_kv_cap = 0;               // the tenants file's cap on the KV the noisy tenant's requests hold
  double weighted_kv_share = 0;          // the tenants file's share of the KV pool guaranteed to tenant-0

  // Throws pagoda::InvalidRequest naming the flag.
  void validate() const;
};

struct MultiTenantWorkload {
  std::vector<BenchTenant> tenants;  // bench_tenants(num_tenants)
  std::vector<BenchPrompt> prompts;  // in arrival order; BenchPrompt::tenant indexes `tenants`
  std::vector<double> arrivals;      // seconds from the start, non-decreasing, one per prompt
};

// The popularity of N ranks: weights 1 / (k + 1)^s, k = 0..N-1 (unnormalized).
std::vector<double> zipf_weights(int n, double s);

// `synthetic`: num_prompts (ordinary + noisy requests), lengths, prefix_len (>= 1), seed. `arrivals`: the
// arrival process's times for those num_prompts requests, non-decreasing (seconds). The result has
// num_prompts + the periodic tenant's requests. Throws pagoda::InvalidRequest for bad settings.
MultiTenantWorkload multi_tenant_workload(const MultiTenantOptions& mt, const SyntheticOptions& synthetic,
                                          const std::vector<TokenId>& pool, const std::vector<double>& arrivals);

}  // namespace pagoda::bench
