// Per-tenant figures on hand-made records: requests, failures, prefix-cache hit rate, TTFT median and P99
// (numpy's linear percentiles), and the same over all requests; the JSON names every tenant.
#include <gtest/gtest.h>

#include "pagoda/bench/tenant_summary.h"

namespace pagoda::bench {
namespace {

RequestRecord done(const std::string& tenant, double ttft_s, int prompt, int cached) {
  RequestRecord r;
  r.tenant = tenant;
  r.success = true;
  r.ttft = ttft_s;
  r.e2el = ttft_s + 0.1;
  r.prompt_tokens = prompt;
  r.cached_tokens = cached;
  return r;
}

TEST(TenantSummary, HitRatesAndTtftPercentilesPerTenant) {
  const std::vector<BenchTenant> tenants = bench_tenants(2);  // tenant-0, tenant-1, periodic, noisy
  std::vector<RequestRecord> records = {
      done("tenant-0", 0.010, 100, 0),  done("tenant-0", 0.020, 100, 64), done("tenant-0", 0.030, 100, 96),
      done("tenant-0", 0.040, 100, 96), done("noisy", 0.200, 300, 0),     done("noisy", 0.100, 300, 0),
      done("periodic", 0.005, 50, -1),  // a server that reports no cached tokens
  };
  RequestRecord failed;
  failed.tenant = "tenant-0";
  failed.error = "HTTP 500";
  failed.prompt_tokens = 100;
  records.push_back(failed);

  const TenantSummary s = summarize_tenants(records, tenants);
  ASSERT_EQ(s.tenants.size(), 4u);
  const TenantStats& t0 = s.tenants[0];
  EXPECT_EQ(t0.requests, 5);
  EXPECT_EQ(t0.completed, 4);
  EXPECT_EQ(t0.failed, 1);
  EXPECT_EQ(t0.prompt_tokens, 400);  // the failed request's usage does not count
  EXPECT_EQ(t0.cached_tokens, 256);
  ASSERT_TRUE(t0.hit_rate().has_value());
  EXPECT_DOUBLE_EQ(*t0.hit_rate(), 0.64);
  EXPECT_EQ(t0.ttft_ms.count, 4u);
  EXPECT_NEAR(t0.ttft_ms.median, 25, 1e-9);
  EXPECT_NEAR(t0.p99_ttft_ms(), 30 + 0.97 * 10, 1e-9);  // rank 0.99 * 3 = 2.97 between 30 and 40

  const TenantStats& t1 = s.tenants[1];  // sent nothing
  EXPECT_EQ(t1.requests, 0);
  EXPECT_FALSE(t1.hit_rate().has_value());
  EXPECT_EQ(t1.ttft_ms.median, 0);

  const TenantStats& periodic = s.tenants[2];
  EXPECT_EQ(periodic.requests, 1);
  EXPECT_EQ(periodic.cached_tokens, -1);
  EXPECT_FALSE(periodic.hit_rate().has_value());

  const TenantStats& noisy = s.tenants[3];
  EXPECT_EQ(noisy.requests, 2);
  EXPECT_DOUBLE_EQ(*noisy.hit_rate(), 0.0);
  EXPECT_NEAR(noisy.ttft_ms.median, 150, 1e-9);
  EXPECT_NEAR(noisy.p99_ttft_ms(), 100 + 0.99 * 100, 1e-9);

  const TenantStats& all = s.overall;
  EXPECT_EQ(all.requests, 8);
  EXPECT_EQ(all.failed, 1);
  EXPECT_EQ(all.prompt_tokens, 400 + 600 + 50);
  EXPECT_EQ(all.cached_tokens, 256);
  EXPECT_DOUBLE_EQ(*all.hit_rate(), 256.0 / 1050.0);
  EXPECT_EQ(all.ttft_ms.count, 7u);
  EXPECT_NEAR(all.ttft_ms.median, 30, 1e-9);  // 5 10 20 30 40 100 200
  EXPECT_NEAR(all.p99_ttft_ms(), 100 + 0.94 * 100, 1e-9);  // rank 0.99 * 6 = 5.94

  MultiTenantOptions mt;
  mt.num_tenants = 2;
  const nlohmann::json j = multi_tenant_json(mt, tenants, s);
  ASSERT_EQ(j["tenants"].size(), 4u);
  EXPECT_EQ(j["tenants"][0]["name"], "tenant-0");
  EXPECT_EQ(j["tenants"][0]["key"], "sk-bench-tenant-0");
  EXPECT_EQ(j["tenants"][0]["requests"], 5);
  EXPECT_DOUBLE_EQ(j["tenants"][0]["prefix_cache_hit_rate"].get<double>(), 0.64);
  EXPECT_DOUBLE_EQ(j["tenants"][0]["p99_ttft_ms"].get<double>(), 39.7);
  EXPECT_TRUE(j["tenants"][2]["prefix_cache_hit_rate"].is_null());
  EXPECT_EQ(j["tenants"][3]["kind"], "noisy");
  EXPECT_EQ(j["periodic_requests"], 1);
  EXPECT_EQ(j["overall"]["requests"], 8);
}

TEST(TenantSummary, TableHasARowPerTenantAndOverall) {
  const std::vector<BenchTenant> tenants = bench_tenants(1);
  const TenantSummary s = summarize_tenants({done("tenant-0", 0.01, 10, 5)}, tenants);
  char* buf = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&buf, &size);
  print_tenants(out, tenants, s);
  std::fclose(out);
  const std::string text(buf, size);
  std::free(buf);
  EXPECT_NE(text.find("tenant-0     ordinary   0.80        1      0    50.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("tenant-0     ordinary   0.80        1      0    50.0%      10.00      10.00"), std::string::npos) << text;
  EXPECT_NE(text.find("noisy        noisy      0.30        0      0        -          -          -"), std::string::npos) << text;
  EXPECT_NE(text.find("\nall "), std::string::npos) << text;
}

}  // namespace
}  // namespace pagoda::bench
