// Bench tenants and their tenants file.
#include "pagoda/bench/tenants.h"

#include <fmt/format.h>

#include "pagoda/core/error.h"

namespace pagoda::bench {

const char* kind_name(TenantKind kind) {
  switch (kind) {
    case TenantKind::kOrdinary: return "ordinary";
    case TenantKind::kPeriodic: return "periodic";
    case TenantKind::kNoisy: return "noisy";
  }
  return "?";
}

std::vector<BenchTenant> bench_tenants(int num_ordinary) {
  if (num_ordinary < 1) throw InvalidRequest("--mt-tenants must be at least 1");
  std::vector<BenchTenant> tenants;
  for (int i = 0; i < num_ordinary; ++i) {
    const std::string name = fmt::format("tenant-{}", i);
    tenants.push_back({name, "sk-bench-" + name, TenantKind::kOrdinary, i == 0 ? 0.8 : 0.5});
  }
  tenants.push_back({"periodic", "sk-bench-periodic", TenantKind::kPeriodic, 0.8});
  tenants.push_back({"noisy", "sk-bench-noisy", TenantKind::kNoisy, 0.3, 1});  // behind the others
  return tenants;
}

nlohmann::ordered_json tenants_file_json(const std::vector<BenchTenant>& tenants) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();  // in the tenants' order
  for (const BenchTenant& t : tenants) {
    out[t.name] = {{"keys", {t.key}}, {"weight", t.weight}, {"share_prefixes", false}, {"priority", t.priority}};
    if (t.prompt_tokens_per_step > 0) out[t.name]["prompt_tokens_per_step"] = t.prompt_tokens_per_step;
    if (t.kv_cap > 0) out[t.name]["kv_cap"] = t.kv_cap;
    if (t.kv_share > 0) out[t.name]["kv_share"] = t.kv_share;
  }
  return nlohmann::ordered_json{{"tenants", std::move(out)}};
}

}  // namespace pagoda::bench
