// The multi-tenant dataset: seeded, tenants' system prompts shared within a tenant and distinct across,
// noisy prompts sharing nothing, the periodic tenant exactly every T, Zipf popularity by rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "pagoda/bench/arrivals.h"
#include "pagoda/bench/multi_tenant.h"
#include "pagoda/core/error.h"

namespace pagoda::bench {
namespace {

std::vector<TokenId> pool_of(int n) {
  std::vector<TokenId> pool(static_cast<size_t>(n));
  std::iota(pool.begin(), pool.end(), 100);
  return pool;
}

SyntheticOptions small(int num_prompts) {
  SyntheticOptions o;
  o.num_prompts = num_prompts;
  o.input_len = 12;
  o.output_len = 5;
  o.prefix_len = 40;
  o.seed = 3;
  return o;
}

size_t common_prefix(const std::vector<TokenId>& a, const std::vector<TokenId>& b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + std::min(a.size(), b.size()), b.begin()).first - a.begin());
}

int index_of(const MultiTenantWorkload& w, TenantKind kind) {
  for (size_t t = 0; t < w.tenants.size(); ++t)
    if (w.tenants[t].kind == kind) return static_cast<int>(t);
  return -1;
}

TEST(MultiTenant, SeededAndDeterministic) {
  const MultiTenantOptions mt;
  const SyntheticOptions o = small(200);
  const std::vector<double> arrivals = arrival_times(200, 50, 1, 3);
  const MultiTenantWorkload a = multi_tenant_workload(mt, o, pool_of(500), arrivals);
  const MultiTenantWorkload b = multi_tenant_workload(mt, o, pool_of(500), arrivals);
  ASSERT_EQ(a.prompts.size(), b.prompts.size());
  EXPECT_EQ(a.arrivals, b.arrivals);
  for (size_t i = 0; i < a.prompts.size(); ++i) {
    EXPECT_EQ(a.prompts[i].ids, b.prompts[i].ids) << i;
    EXPECT_EQ(a.prompts[i].tenant, b.prompts[i].tenant) << i;
    EXPECT_EQ(a.prompts[i].output_len, b.prompts[i].output_len) << i;
  }
  SyntheticOptions other = o;
  other.seed = 4;
  const MultiTenantWorkload c = multi_tenant_workload(mt, other, pool_of(500), arrivals);
  size_t same_tenant = 0;
  for (size_t i = 0; i < std::min(a.prompts.size(), c.prompts.size()); ++i) {
    EXPECT_NE(a.prompts[i].ids, c.prompts[i].ids) << i;
    same_tenant += a.prompts[i].tenant == c.prompts[i].tenant;
  }
  EXPECT_LT(same_tenant, a.prompts.size() * 3 / 4);  // another seed, another draw of tenants
  ASSERT_EQ(a.tenants.size(), 10u);  // 8 ordinary + periodic + noisy
  EXPECT_EQ(a.tenants[0].key, "sk-bench-tenant-0");
  EXPECT_EQ(a.tenants[8].key, "sk-bench-periodic");
  EXPECT_EQ(a.tenants[9].key, "sk-bench-noisy");
}

TEST(MultiTenant, TenantPrefixesSharedWithinAndDistinctAcross) {
  MultiTenantOptions mt;
  mt.num_tenants = 4;
  mt.zipf_s = 0.5;
  const SyntheticOptions o = small(300);
  const MultiTenantWorkload w = multi_tenant_workload(mt, o, pool_of(500), arrival_times(300, 100, 1, 1));
  const int noisy = index_of(w, TenantKind::kNoisy);
  std::map<int, std::vector<TokenId>> prefix_of;
  for (const BenchPrompt& p : w.prompts) {
    ASSERT_GE(p.tenant, 0);
    ASSERT_LT(p.tenant, static_cast<int>(w.tenants.size()));
    EXPECT_EQ(p.prompt_len, static_cast<int>(p.ids.size()));
    EXPECT_EQ(p.output_len, 5);
    if (p.tenant == noisy) continue;
    EXPECT_EQ(p.prompt_len, 40 + 12);
    const std::vector<TokenId> prefix(p.ids.begin(), p.ids.begin() + 40);
    auto [it, fresh] = prefix_of.emplace(p.tenant, prefix);
    EXPECT_EQ(it->second, prefix) << "tenant " << p.tenant;
  }
  ASSERT_EQ(prefix_of.size(), 5u);  // every ordinary tenant and the periodic one sent something
  for (const auto& [a, pa] : prefix_of) {
    for (const auto& [b, pb] : prefix_of) {
      if (a != b) {
        EXPECT_LT(common_prefix(pa, pb), 4u) << a << " vs " << b;
      }
    }
  }
}

TEST(MultiTenant, NoisyPromptsShareNothing) {
  MultiTenantOptions mt;
  mt.noisy_share = 0.3;
  const SyntheticOptions o = small(200);
  const MultiTenantWorkload w = multi_tenant_workload(mt, o, pool_of(500), arrival_times(200, 100, 1, 2));
  const int noisy = index_of(w, TenantKind::kNoisy);
  std::vector<const BenchPrompt*> noisy_prompts, others;
  for (const BenchPrompt& p : w.prompts) (p.tenant == noisy ? noisy_prompts : others).push_back(&p);
  ASSERT_EQ(noisy_prompts.size(), 60u);  // round(0.3 * 200)
  for (size_t i = 0; i < noisy_prompts.size(); ++i) {
    EXPECT_EQ(noisy_prompts[i]->prompt_len, 2 * (40 + 12));  // the default: twice an ordinary prompt
    for (size_t j = i + 1; j < noisy_prompts.size(); ++j)
      EXPECT_LT(common_prefix(noisy_prompts[i]->ids, noisy_prompts[j]->ids), 4u);
    for (const BenchPrompt* p : others) EXPECT_LT(common_prefix(noisy_prompts[i]->ids, p->ids), 4u);
  }
  mt.noisy_input_len = 77;
  mt.noisy_share = 0;
  const MultiTenantWorkload none = multi_tenant_workload(mt, o, pool_of(500), arrival_times(200, 100, 1, 2));
  EXPECT_EQ(std::count_if(none.prompts.begin(), none.prompts.end(), [&](const BenchPrompt& p) { return p.tenant == noisy; }), 0);
  mt.noisy_share = 0.5;
  for (const BenchPrompt& p : multi_tenant_workload(mt, o, pool_of(500), arrival_times(200, 100, 1, 2)).prompts) {
    if (p.tenant == noisy) {
      EXPECT_EQ(p.prompt_len, 77);
    }
  }
}

TEST(MultiTenant, PeriodicTenantArrivesExactlyEveryInterval) {
  MultiTenantOptions mt;
  mt.periodic_interval_ms = 250;
  const SyntheticOptions o = small(100);
  const std::vector<double> arrivals = arrival_times(100, 20, 1, 5);  // about 5 s of Poisson arrivals
  const MultiTenantWorkload w = multi_tenant_workload(mt, o, pool_of(500), arrivals);
  const int periodic = index_of(w, TenantKind::kPeriodic);
  ASSERT_EQ(w.arrivals.size(), w.prompts.size());
  EXPECT_TRUE(std::is_sorted(w.arrivals.begin(), w.arrivals.end()));
  std::vector<double> periodic_times, other_times;
  for (size_t i = 0; i < w.prompts.size(); ++i)
    (w.prompts[i].tenant == periodic ? periodic_times : other_times).push_back(w.arrivals[i]);
  EXPECT_EQ(other_times, arrivals);  // the arrival process's times, in order, untouched
  const size_t expected = static_cast<size_t>(std::floor(arrivals.back() / 0.25)) + 1;
  ASSERT_EQ(periodic_times.size(), expected);
  ASSERT_GT(expected, 10u);
  for (size_t k = 0; k < periodic_times.size(); ++k) EXPECT_EQ(periodic_times[k], static_cast<double>(k) * 0.25) << k;
  EXPECT_LE(periodic_times.back(), arrivals.back());
  EXPECT_GT(periodic_times.back() + 0.25, arrivals.back());  // one per interval over the whole span

  mt.periodic_requests = 7;  // a fixed count, past the others' span if need be
  const MultiTenantWorkload fixed = multi_tenant_workload(mt, o, pool_of(500), arrival_times(100, 1000, 1, 5));
  std::vector<double> times;
  for (size_t i = 0; i < fixed.prompts.size(); ++i)
    if (fixed.prompts[i].tenant == periodic) times.push_back(fixed.arrivals[i]);
  ASSERT_EQ(times.size(), 7u);
  EXPECT_EQ(times.back(), 6 * 0.25);
  EXPECT_EQ(fixed.prompts.size(), 107u);
}

TEST(MultiTenant, ZipfCountsOrderedByRank) {
  const std::vector<double> w = zipf_weights(4, 1.0);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_DOUBLE_EQ(w[0], 1.0);
  EXPECT_DOUBLE_EQ(w[1], 0.5);
  EXPECT_DOUBLE_EQ(w[3], 0.25);
  EXPECT_EQ(zipf_weights(3, 0), (std::vector<double>{1, 1, 1}));

  MultiTenantOptions mt;  // 8 tenants, s = 1
  mt.noisy_share = 0;
  SyntheticOptions o = small(20000);
  o.input_len = 1;
  o.prefix_len = 1;
  const MultiTenantWorkload wl = multi_tenant_workload(mt, o, pool_of(50), std::vector<double>(20000, 0.0));
  std::vector<int> count(8, 0);
  for (const BenchPrompt& p : wl.prompts)
    if (p.tenant < 8) ++count[static_cast<size_t>(p.tenant)];
  for (size_t k = 1; k < count.size(); ++k) EXPECT_GT(count[k - 1], count[k]) << "rank " << k;
  // Expected share of rank k: (1 / (k + 1)) / H_8, H_8 = 2.717857.
  for (size_t k = 0; k < count.size(); ++k)
    EXPECT_NEAR(count[k] / 20000.0, 1.0 / (k + 1) / 2.717857, 0.01) << "rank " << k;
}

TEST(MultiTenant, BadSettingsAreRefused) {
  const SyntheticOptions o = small(10);
  const std::vector<double> arrivals(10, 0.0);
  const auto refused = [&](auto change) {
    MultiTenantOptions mt;
    SyntheticOptions s = o;
    change(mt, s);
    EXPECT_THROW(multi_tenant_workload(mt, s, pool_of(10), arrivals), InvalidRequest);
  };
  refused([](MultiTenantOptions& mt, SyntheticOptions&) { mt.num_tenants = 0; });
  refused([](MultiTenantOptions& mt, SyntheticOptions&) { mt.zipf_s = -1; });
  refused([](MultiTenantOptions& mt, SyntheticOptions&) { mt.periodic_interval_ms = 0; });
  refused([](MultiTenantOptions& mt, SyntheticOptions&) { mt.noisy_share = 1; });
  refused([](MultiTenantOptions& mt, SyntheticOptions&) { mt.noisy_input_len = -1; });
  refused([](MultiTenantOptions&, SyntheticOptions& s) { s.prefix_len = 0; });
  refused([](MultiTenantOptions&, SyntheticOptions& s) { s.input_len = 0; });
  EXPECT_THROW(multi_tenant_workload(MultiTenantOptions{}, o, {}, arrivals), InvalidRequest);
}

}  // namespace
}  // namespace pagoda::bench
