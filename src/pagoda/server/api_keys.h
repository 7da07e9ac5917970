// ApiKeys: bearer keys and the tenants they belong to. A tenant names a prefix-cache salt and carries
// limits (max concurrent requests, requests a second) and its claims on the KV pool (sched/tenant_kv.h).
// Keys come from --api-key (tenant "default"), --api-keys-file and --tenants-file.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pagoda/sched/tenant_kv.h"

namespace pagoda::server {

// The metrics label tenants by name, at most kMaxTenantLabels of them, the rest as kOtherTenantsLabel: a name no
// tenant may take (its series would merge with theirs).
inline constexpr size_t kMaxTenantLabels = 64;
inline constexpr std::string_view kOtherTenantsLabel = "other";

struct Tenant {
  std::string name;
  int max_concurrent_requests = 0;     // 0: unlimited
  double max_requests_per_second = 0;  // API requests a second, as a token bucket with that burst; 0: unlimited
  float weight = 1.0f;                 // in eviction (LRU-K) and --scheduling-policy fair
  double kv_share = 0, kv_cap = 0;     // fractions of the KV pool (<= 1) or tokens; 0: none
  bool share_prefixes = false;         // prefix-cache hits across tenants that all set it
  int priority = 0;                    // added to each request's priority (--scheduling-policy priority: lower first)
  int prompt_tokens_per_step = 0;      // the most prompt tokens its requests compute in one step; 0: no limit

  TenantKv kv() const { return TenantKv{name, weight, kv_share, kv_cap, priority, prompt_tokens_per_step}; }
  // The prefix-cache salt of a request with the client's cache_salt: the tenant's name, or one salt common
  // to every tenant that shares prefixes.
  std::string cache_salt(const std::string& request_salt) const;
};

class ApiKeys {
 public:
  // `source`: where the key comes from ("--api-key", a file's path), for errors. Throws pagoda::Error for an empty
  // key or one with spaces or control characters, a key given twice, and a tenant named in two sources.
  void add(const std::string& key, Tenant tenant, const std::string& source = "--api-key");
  // JSON: {"KEY": "tenant"} or {"KEY": {"tenant": "...", "max_concurrent_requests": N,
  // "max_requests_per_second": R}} or {"keys": [{"key": "...", "tenant": "...", ...}]}.
  // Simple: one "KEY TENANT [MAX_CONCURRENT [MAX_PER_SECOND]]" per line, '#' comments. Throws pagoda::Error
  // naming the file, also for a file that holds no keys (it would leave the server open) and unknown fields.
  void load_file(const std::string& path);
  // --tenants-file: {"tenants": {"NAME": {"keys": ["sk-..."], "weight": 0.8, "kv_share": 0.2, "kv_cap": 0.5,
  // "max_concurrent_requests": 16, "max_requests_per_second": 10, "share_prefixes": false, "priority": 0,
  // "prompt_tokens_per_step": 256}}}, all but
  // "keys" optional. Throws pagoda::Error naming the file and the tenant (also for a tenant named twice, or none).
  void load_tenants_file(const std::string& path);

  bool enabled() const { return !keys_.empty(); }
  // Every tenant a key names, each once (by name).
  std::vector<Tenant> tenants() const;
  // The tenant of an "Authorization: Bearer KEY" header value; nullptr when missing or unknown.
  const Tenant* authenticate(const std::string& authorization) const;

 private:
  void read_keys_file(const std::string& path);

  std::unordered_map<std::string, Tenant> keys_;
  std::unordered_map<std::string, std::string> tenant_sources_;  // tenant name -> where it is described
};

}  // namespace pagoda::server
