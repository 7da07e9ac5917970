// A multi-tenant benchmark tenant by tenant: each tenant's requests, prefix-cache hit rate (cached prompt
// tokens / prompt tokens, from the server's usage.prompt_tokens_details.cached_tokens) and TTFT median and
// P99 (ms, numpy's linear percentiles), and the same over all requests; as a table and as JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "pagoda/bench/multi_tenant.h"
#include "pagoda/bench/percentile.h"
#include "pagoda/bench/request_record.h"
#include "pagoda/bench/tenants.h"

namespace pagoda::bench {

struct TenantStats {
  int requests = 0, completed = 0, failed = 0;
  int64_t prompt_tokens = 0;   // successful requests' usage
  int64_t cached_tokens = -1;  // of those, served by the prefix cache; -1: no response reported it
  Distribution ttft_ms;        // successful requests; percentiles {50, 99}

  // cached_tokens / prompt_tokens; nullopt when not reported or no prompt tokens.
  std::optional<double> hit_rate() const;
  double p99_ttft_ms() const { return ttft_ms.percentiles.at(1).second; }
};

struct TenantSummary {
  std::vector<TenantStats> tenants;  // one per tenant, in the tenants' order
  TenantStats overall;               // every record
};

// Each record counts for the tenant named by RequestRecord::tenant (and in `overall`).
TenantSummary summarize_tenants(const std::vector<RequestRecord>& records, const std::vector<BenchTenant>& tenants);

void print_tenants(std::FILE* out, const std::vector<BenchTenant>& tenants, const TenantSummary& summary);

// {"num_tenants", "zipf_s", ... (the settings), "tenants": [{"name", "kind", "key", "weight", "requests", ...,
// "prefix_cache_hit_rate", "median_ttft_ms", "p99_ttft_ms"}], "overall": {...}}
nlohmann::json multi_tenant_json(const MultiTenantOptions& options, const std::vector<BenchTenant>& tenants,
                                 const TenantSummary& summary);

}  // namespace pagoda::bench
