// The tenants file that --mt-write-tenants-file writes loads in the server's own parser
// (server::ApiKeys::load_tenants_file), every bench key naming its tenant with its weight.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "pagoda/bench/tenants.h"
#include "pagoda/server/api_keys.h"

namespace pagoda::bench {
namespace {

TEST(TenantsFile, LoadsInTheServer) {
  const std::vector<BenchTenant> tenants = bench_tenants(8);
  ASSERT_EQ(tenants.size(), 10u);
  const auto path = std::filesystem::temp_directory_path() / "pagoda_bench_tenants.json";
  std::ofstream(path) << tenants_file_json(tenants).dump(2);
  server::ApiKeys keys;
  keys.load_tenants_file(path.string());
  ASSERT_TRUE(keys.enabled());
  for (const BenchTenant& t : tenants) {
    const server::Tenant* found = keys.authenticate("Bearer " + t.key);
    ASSERT_NE(found, nullptr) << t.key;
    EXPECT_EQ(found->name, t.name);
    EXPECT_FLOAT_EQ(found->weight, static_cast<float>(t.weight));
    EXPECT_EQ(found->kv_cap, 0);  // no quotas, no limits: nothing that could fail a benchmark's request
    EXPECT_EQ(found->kv_share, 0);
    EXPECT_FALSE(found->share_prefixes);
    EXPECT_EQ(found->max_concurrent_requests, 0);
    EXPECT_EQ(found->max_requests_per_second, 0);
    EXPECT_EQ(found->priority, t.priority);
  }
  EXPECT_EQ(keys.authenticate("Bearer sk-bench-noisy")->priority, 1);  // behind the others under priority scheduling
  EXPECT_EQ(keys.authenticate("Bearer sk-bench-tenant-0")->priority, 0);
  EXPECT_EQ(keys.authenticate("Bearer sk-bench-tenant-0")->name, "tenant-0");
  EXPECT_FLOAT_EQ(keys.authenticate("Bearer sk-bench-tenant-0")->weight, 0.8f);
  EXPECT_FLOAT_EQ(keys.authenticate("Bearer sk-bench-tenant-3")->weight, 0.5f);
  EXPECT_FLOAT_EQ(keys.authenticate("Bearer sk-bench-periodic")->weight, 0.8f);
  EXPECT_FLOAT_EQ(keys.authenticate("Bearer sk-bench-noisy")->weight, 0.3f);
  EXPECT_EQ(keys.authenticate("Bearer sk-bench-tenant-8"), nullptr);
  std::filesystem::remove(path);
}

TEST(TenantsFile, TheNoisyTenantsLimitsAndTheWeightedTenantsShareLoadInTheServer) {
  std::vector<BenchTenant> tenants = bench_tenants(2);
  ASSERT_EQ(tenants.back().kind, TenantKind::kNoisy);
  tenants.back().prompt_tokens_per_step = 256;  // --mt-noisy-prompt-tokens-per-step
  tenants.back().kv_cap = 0.4;                 // --mt-noisy-kv-cap
  tenants.front().kv_share = 0.2;              // --mt-weighted-kv-share
  const auto path = std::filesystem::temp_directory_path() / "pagoda_bench_tenants_noisy.json";
  std::ofstream(path) << tenants_file_json(tenants).dump(2);
  server::ApiKeys keys;
  keys.load_tenants_file(path.string());
  const server::Tenant* noisy = keys.authenticate("Bearer sk-bench-noisy");
  ASSERT_NE(noisy, nullptr);
  EXPECT_DOUBLE_EQ(noisy->kv().kv_cap, 0.4);
  EXPECT_EQ(noisy->kv().prompt_tokens_per_step, 256);
  EXPECT_EQ(keys.authenticate("Bearer sk-bench-tenant-0")->kv().kv_cap, 0);  // the others unlimited
  EXPECT_DOUBLE_EQ(keys.authenticate("Bearer sk-bench-tenant-0")->kv().kv_share, 0.2);
  EXPECT_EQ(keys.authenticate("Bearer sk-bench-tenant-1")->kv().kv_share, 0);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace pagoda::bench
