// Per-tenant figures (tenant_summary.h).
#include "pagoda/bench/tenant_summary.h"

#include <fmt/format.h>

#include <algorithm>

namespace pagoda::bench {
namespace {

// Collects one tenant's records; finish() turns the TTFTs into the distribution.
struct Accumulator {
  TenantStats stats;
  std::vector<double> ttft_ms;

  void add(const RequestRecord& r) {
    ++stats.requests;
    if (!r.success) {
      ++stats.failed;
      return;
    }
    ++stats.completed;
    stats.prompt_tokens += std::max(r.prompt_tokens, 0);
    if (r.cached_tokens >= 0) stats.cached_tokens = std::max<int64_t>(stats.cached_tokens, 0) + r.cached_tokens;
    ttft_ms.push_back(r.ttft * 1e3);
  }
  TenantStats finish() {
    stats.ttft_ms = describe(std::move(ttft_ms), {50, 99});
    return stats;
  }
};

nlohmann::json stats_json(const TenantStats& s) {
  const std::optional<double> rate = s.hit_rate();
  return {{"requests", s.requests},
          {"completed", s.completed},
          {"failed", s.failed},
          {"prompt_tokens", s.prompt_tokens},
          {"cached_tokens", s.cached_tokens >= 0 ? nlohmann::json(s.cached_tokens) : nlohmann::json(nullptr)},
          {"prefix_cache_hit_rate", rate ? nlohmann::json(*rate) : nlohmann::json(nullptr)},
          {"mean_ttft_ms", s.ttft_ms.mean},
          {"median_ttft_ms", s.ttft_ms.median},
          {"p99_ttft_ms", s.p99_ttft_ms()}};
}

void row(std::FILE* out, const std::string& name, const std::string& kind, const std::string& weight, const TenantStats& s) {
  const std::optional<double> rate = s.hit_rate();
  const auto ms = [&](double v) { return s.completed > 0 ? fmt::format("{:.2f}", v) : std::string("-"); };
  std::fprintf(out, "%-12s %-8s %6s %8d %6d %8s %10s %10s\n", name.c_str(), kind.c_str(), weight.c_str(), s.requests,
               s.failed, rate ? fmt::format("{:.1f}%", 100 * *rate).c_str() : "-", ms(s.ttft_ms.median).c_str(),
               ms(s.p99_ttft_ms()).c_str());
}

}  // namespace

std::optional<double> TenantStats::hit_rate() const {
  if (cached_tokens < 0 || prompt_tokens <= 0) return std::nullopt;
  return static_cast<double>(cached_tokens) / static_cast<double>(prompt_tokens);
}

TenantSummary summarize_tenants(const std::vector<RequestRecord>& records, const std::vector<BenchTenant>& tenants) {
  std::vector<Accumulator> per(tenants.size());
  Accumulator all;
  for (const RequestRecord& r : records) {
    all.add(r);
    for (size_t t = 0; t < tenants.size(); ++t) {
      if (tenants[t].name == r.tenant) per[t].add(r);
    }
  }
  TenantSummary out;
  for (Accumulator& a : per) out.tenants.push_back(a.finish());
  out.overall = all.finish();
  return out;
}

void print_tenants(std::FILE* out, const std::vector<BenchTenant>& tenants, const TenantSummary& s) {
  std::fprintf(out, "%s\n", fmt::format("{:=^76}", " Tenants (--dataset multi-tenant) ").c_str());
  std::fprintf(out, "%-12s %-8s %6s %8s %6s %8s %10s %10s\n", "tenant", "kind", "weight", "requests", "failed", "hit rate",
               "TTFT p50", "TTFT p99");
  for (size_t t = 0; t < tenants.size(); ++t)
    row(out, tenants[t].name, kind_name(tenants[t].kind), fmt::format("{:.2f}", tenants[t].weight), s.tenants[t]);
  row(out, "all", "", "", s.overall);
  std::fprintf(out, "%s\n", "(hit rate: prompt tokens served by the prefix cache; TTFT in ms)");
}

nlohmann::json multi_tenant_json(const MultiTenantOptions& o, const std::vector<BenchTenant>& tenants,
                                 const TenantSummary& s) {
  nlohmann::json list = nlohmann::json::array();
  int periodic_requests = 0;
  for (size_t t = 0; t < tenants.size(); ++t) {
    if (tenants[t].kind == TenantKind::kPeriodic) periodic_requests = s.tenants[t].requests;
    nlohmann::json j = {{"name", tenants[t].name}, {"kind", kind_name(tenants[t].kind)}, {"key", tenants[t].key},
                        {"weight", tenants[t].weight}};
    j.update(stats_json(s.tenants[t]));
    list.push_back(std::move(j));
  }
  return {{"num_tenants", o.num_tenants},
          {"zipf_s", o.zipf_s},
          {"periodic_interval_ms", o.periodic_interval_ms},
          {"periodic_requests", periodic_requests},
          {"noisy_share", o.noisy_share},
          {"noisy_input_len", o.noisy_input_len},
          {"tenants", std::move(list)},
          {"overall", stats_json(s.overall)}};
}

}  // namespace pagoda::bench
