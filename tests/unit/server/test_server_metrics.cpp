// ServerMetrics' per-tenant series: counted from finished requests' traces, blocks per tenant from the
// engine's stats (a tenant holding none reads 0), and at most kMaxTenantLabels tenants by name (the rest
// are "other"), so no number of tenants makes the exposition grow without bound.
#include "pagoda/server/server_metrics.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace pagoda::server {
namespace {

RequestTrace trace_of(const std::string& tenant, int prompt_tokens, int cached_tokens) {
  RequestTrace t;
  t.tenant = tenant;
  t.usage.prompt_tokens = prompt_tokens;
  t.usage.cached_tokens = cached_tokens;
  return t;
}

// Distinct values of the tenant label in the lines of `family`.
std::set<std::string> tenant_values(const std::string& text, const std::string& family) {
  std::set<std::string> out;
  size_t pos = 0;
  while ((pos = text.find("\n" + family + "{", pos)) != std::string::npos) {
    const size_t end = text.find('\n', pos + 1);
    const std::string line = text.substr(pos + 1, end - pos - 1);
    const size_t at = line.find("tenant=\"");
    if (at != std::string::npos) out.insert(line.substr(at + 8, line.find('"', at + 8) - at - 8));
    pos = end;
  }
  return out;
}

TEST(ServerMetrics, TenantSeriesAreCountedAndBounded) {
  ServerMetrics m("model");
  m.observe_trace(trace_of("alice", 40, 32));
  m.observe_trace(trace_of("alice", 10, 0));
  m.observe_trace(trace_of("-", 5, 0));  // no tenant: no series
  EngineStats stats;
  stats.tenant_kv_blocks = {{"bob", 7}};
  std::string text = m.render(stats);
  EXPECT_NE(text.find("pagoda:tenant_requests_total{model_name=\"model\",tenant=\"alice\"} 2"), std::string::npos) << text;
  EXPECT_NE(text.find("pagoda:tenant_prompt_tokens_total{model_name=\"model\",tenant=\"alice\"} 50"), std::string::npos);
  EXPECT_NE(text.find("pagoda:tenant_prefix_cache_hits_total{model_name=\"model\",tenant=\"alice\"} 32"), std::string::npos);
  EXPECT_NE(text.find("pagoda:tenant_kv_cache_blocks{model_name=\"model\",tenant=\"bob\"} 7"), std::string::npos);
  EXPECT_NE(text.find("pagoda:tenant_kv_cache_blocks{model_name=\"model\",tenant=\"alice\"} 0"), std::string::npos);
  EXPECT_EQ(tenant_values(text, "pagoda:tenant_requests_total"), (std::set<std::string>{"alice"}));

  for (int i = 0; i < 200; ++i) m.observe_trace(trace_of("t" + std::to_string(i), 1, 0));
  stats.tenant_kv_blocks = {{"bob", 0}};
  text = m.render(stats);
  // 64 tenants by name over all the families (alice, bob, 62 of the t's), the rest as "other".
  std::set<std::string> named = tenant_values(text, "pagoda:tenant_requests_total");
  EXPECT_TRUE(named.contains("other"));
  EXPECT_TRUE(named.contains("alice"));
  for (const std::string& v : tenant_values(text, "pagoda:tenant_kv_cache_blocks")) named.insert(v);
  named.erase("other");
  EXPECT_EQ(named.size(), 64u);
  // Known tenants keep their own series after the limit is reached.
  m.observe_trace(trace_of("alice", 1, 0));
  EXPECT_NE(m.render(stats).find("pagoda:tenant_requests_total{model_name=\"model\",tenant=\"alice\"} 3"),
            std::string::npos);
}

TEST(ServerMetrics, HostTierAndTenantBlockSeries) {
  ServerMetrics m("model");
  EngineStats stats;
  stats.prefix_cache_host_hits = 48;
  stats.num_host_kv_blocks = 100;
  stats.num_host_kv_blocks_used = 9;
  stats.host_tier.offloaded = 12;
  stats.host_tier.loaded = 3;
  stats.prefetch = {5, 2};
  stats.tenant_block_counts = {{"alice", {.evicted = 7, .prefetched = 5, .host_blocks = 4}}, {"bob", {}}};
  const std::string text = m.render(stats);
  for (const char* line : {"pagoda:prefix_cache_host_hits_total{model_name=\"model\"} 48",
                           "pagoda:kv_host_blocks{model_name=\"model\"} 100",
                           "pagoda:kv_host_blocks_used{model_name=\"model\"} 9",
                           "pagoda:kv_host_offloaded_blocks_total{model_name=\"model\"} 12",
                           "pagoda:kv_host_loaded_blocks_total{model_name=\"model\"} 3",
                           "pagoda:kv_prefetched_blocks_total{model_name=\"model\"} 5",
                           "pagoda:kv_prefetch_hits_total{model_name=\"model\"} 2",
                           "pagoda:tenant_kv_evicted_blocks_total{model_name=\"model\",tenant=\"alice\"} 7",
                           "pagoda:tenant_kv_prefetched_blocks_total{model_name=\"model\",tenant=\"alice\"} 5",
                           "pagoda:tenant_kv_host_blocks{model_name=\"model\",tenant=\"alice\"} 4",
                           "pagoda:tenant_kv_host_blocks{model_name=\"model\",tenant=\"bob\"} 0"})
    EXPECT_NE(text.find(line), std::string::npos) << line;
}

// The precision fallback's switches: one series per direction, and the declined ones (a subset of to_primary)
// under their own name, so that a sum over `direction` counts every switch once.
TEST(ServerMetrics, FallbackSwitchesAreCountedOnceByDirection) {
  ServerMetrics m("model");
  EngineStats stats;
  stats.fallback.switches_to_fallback = 3;
  stats.fallback.switches_to_primary = 3;
  stats.fallback.switches_declined = 2;
  const std::string text = m.render(stats);
  EXPECT_NE(text.find("pagoda:precision_fallback_switches_total{model_name=\"model\",direction=\"to_fallback\"} 3"),
            std::string::npos) << text;
  EXPECT_NE(text.find("pagoda:precision_fallback_switches_total{model_name=\"model\",direction=\"to_primary\"} 3"),
            std::string::npos);
  EXPECT_NE(text.find("pagoda:precision_fallback_declined_total{model_name=\"model\"} 2"), std::string::npos);
  EXPECT_EQ(text.find("direction=\"declined\""), std::string::npos);
}

}  // namespace
}  // namespace pagoda::server
