// ApiKeys: bearer keys and the tenants they belong to. A tenant names a prefix-cache salt and carries
// limits (max concurrent requests). Keys come from --api-key (tenant "default") and --api-keys-file.
#pragma once

#include <string>
#include <unordered_map>

namespace pagoda::server {

struct Tenant {
  std::string name;
  int max_concurrent_requests = 0;     // 0: unlimited
  double max_requests_per_second = 0;  // API requests a second, as a token bucket with that burst; 0: unlimited
};

class ApiKeys {
 public:
  void add(const std::string& key, Tenant tenant);
  // JSON: {"KEY": "tenant"} or {"KEY": {"tenant": "...", "max_concurrent_requests": N,
  // "max_requests_per_second": R}} or {"keys": [{"key": "...", "tenant": "...", ...}]}.
  // Simple: one "KEY TENANT [MAX_CONCURRENT [MAX_PER_SECOND]]" per line, '#' comments. Throws pagoda::Error
  // naming the file.
  void load_file(const std::string& path);

  bool enabled() const { return !keys_.empty(); }
  // The tenant of an "Authorization: Bearer KEY" header value; nullptr when missing or unknown.
  const Tenant* authenticate(const std::string& authorization) const;

 private:
  std::unordered_map<std::string, Tenant> keys_;
};

}  // namespace pagoda::server
