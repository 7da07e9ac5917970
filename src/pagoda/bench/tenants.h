// The tenants of `--dataset multi-tenant`: N ordinary tenants (tenant-0 the most popular), one periodic
// tenant and one noisy tenant, each with a deterministic API key (sk-bench-tenant-0, ..., sk-bench-periodic,
// sk-bench-noisy), and the tenants file `pagoda serve --tenants-file` reads for them
// (--mt-write-tenants-file): LRU-K weights 0.8 for tenant-0 and the periodic tenant, 0.3 for the noisy one,
// 0.5 for the others; no prefix sharing across tenants; no KV quotas and no request limits (edit the file
// to try them: a cap smaller than a noisy prompt would turn its requests into 400s).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace pagoda::bench {

enum class TenantKind { kOrdinary, kPeriodic, kNoisy };

struct BenchTenant {
  std::string name;  // tenant-0 ... tenant-{N-1}, periodic, noisy
  std::string key;   // sent as "Authorization: Bearer KEY"
  TenantKind kind = TenantKind::kOrdinary;
  double weight = 0.5;  // in LRU-K eviction (the tenants file's "weight")
  int priority = 0;     // the tenants file's "priority": with --scheduling-policy priority, lower is admitted first
  int prompt_tokens_per_step = 0;  // the tenants file's "prompt_tokens_per_step" (0: none written)
  double kv_cap = 0;               // the tenants file's "kv_cap": a fraction of the pool or tokens (0: none written)
  double kv_share = 0;             // the tenants file's "kv_share", the same way
};

const char* kind_name(TenantKind kind);  // "ordinary", "periodic", "noisy"

// `num_ordinary` ordinary tenants (ranks 0..N-1), then the periodic tenant, then the noisy one.
// Throws pagoda::InvalidRequest for num_ordinary < 1.
std::vector<BenchTenant> bench_tenants(int num_ordinary);

// {"tenants": {"NAME": {"keys": [KEY], "weight": W, "share_prefixes": false, "priority": P}}}, in the tenants' order,
// with "prompt_tokens_per_step", "kv_cap" and "kv_share" where set.
nlohmann::ordered_json tenants_file_json(const std::vector<BenchTenant>& tenants);

}  // namespace pagoda::bench
