// The multi-tenant workload: tenants' prefixes, Zipf draws, noisy prompts, the periodic timeline.
#include "pagoda/bench/multi_tenant.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "pagoda/core/check.h"
#include "pagoda/core/error.h"

namespace pagoda::bench {

void MultiTenantOptions::validate() const {
  if (num_tenants < 1) throw InvalidRequest("--mt-tenants must be at least 1");
  if (!(zipf_s >= 0) || std::isinf(zipf_s)) throw InvalidRequest("--mt-zipf-s must be a number >= 0");
  if (!(periodic_interval_ms > 0) || std::isinf(periodic_interval_ms))
    throw InvalidRequest("--mt-periodic-interval-ms must be a positive number");
  if (periodic_requests < 0) throw InvalidRequest("--mt-periodic-requests must not be negative");
  if (!(noisy_share >= 0 && noisy_share < 1)) throw InvalidRequest("--mt-noisy-share must be in [0, 1)");
  if (noisy_input_len < 0) throw InvalidRequest("--mt-noisy-input-len must not be negative");
}

std::vector<double> zipf_weights(int n, double s) {
  std::vector<double> w(static_cast<size_t>(std::max(n, 0)));
  for (size_t k = 0; k < w.size(); ++k) w[k] = 1.0 / std::pow(static_cast<double>(k + 1), s);
  return w;
}

MultiTenantWorkload multi_tenant_workload(const MultiTenantOptions& mt, const SyntheticOptions& o,
                                          const std::vector<TokenId>& pool, const std::vector<double>& arrivals) {
  mt.validate();
  if (o.num_prompts < 1) throw InvalidRequest("--num-prompts must be at least 1");
  if (o.input_len < 1) throw InvalidRequest("--random-input-len must be at least 1");
  if (o.output_len < 1) throw InvalidRequest("--random-output-len must be at least 1");
  if (!(o.range_ratio >= 0 && o.range_ratio < 1)) throw InvalidRequest("--random-range-ratio must be in [0, 1)");
  if (o.prefix_len < 1) throw InvalidRequest("--dataset multi-tenant needs --prefix-len >= 1");
  if (pool.empty()) throw InvalidRequest("no tokens to build prompts from");
  PAGODA_CHECK(arrivals.size() == static_cast<size_t>(o.num_prompts));
  PAGODA_CHECK(std::is_sorted(arrivals.begin(), arrivals.end()));

  MultiTenantWorkload w;
  w.tenants = bench_tenants(mt.num_tenants);
  const int periodic = mt.num_tenants, noisy = mt.num_tenants + 1;  // their indexes in w.tenants
  std::mt19937_64 rng(o.seed);
  const auto draw_ids = [&](int n) { return random_ids(rng, pool, n); };
  // System prompts of the ordinary tenants and the periodic one (index = tenant).
  std::vector<std::vector<TokenId>> prefixes;
  for (int t = 0; t <= periodic; ++t) prefixes.push_back(draw_ids(o.prefix_len));
  const auto tenant_prompt = [&](int tenant) {
    BenchPrompt p;
    p.tenant = tenant;
    p.ids = prefixes[static_cast<size_t>(tenant)];
    const std::vector<TokenId> tail = draw_ids(draw_length(rng, o.input_len, o.range_ratio));
    p.ids.insert(p.ids.end(), tail.begin(), tail.end());
    return p;
  };

  // Which of the num_prompts requests are noisy: round(share * n) of them, at random places.
  const size_t n = static_cast<size_t>(o.num_prompts);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<bool> is_noisy(n, false);
  const size_t num_noisy = static_cast<size_t>(std::llround(mt.noisy_share * static_cast<double>(n)));
  for (size_t k = 0; k < num_noisy; ++k) is_noisy[order[k]] = true;
  const int noisy_len = mt.noisy_input_len > 0 ? mt.noisy_input_len : 2 * (o.prefix_len + o.input_len);

  const std::vector<double> zipf = zipf_weights(mt.num_tenants, mt.zipf_s);
  std::discrete_distribution<int> popularity(zipf.begin(), zipf.end());
  struct Timed {
    double at;
    BenchPrompt prompt;
  };
  std::vector<Timed> timeline;
  for (size_t i = 0; i < n; ++i) {
    BenchPrompt p;
    if (is_noisy[i]) {
      p.tenant = noisy;
      p.ids = draw_ids(draw_length(rng, noisy_len, o.range_ratio));
    } else {
      p = tenant_prompt(popularity(rng));
    }
    p.output_len = draw_length(rng, o.output_len, o.range_ratio);
    timeline.push_back({arrivals[i], std::move(p)});
  }
  // The periodic tenant: k * T for k = 0, 1, ...: a fixed count, or as many as the span of the others holds.
  const double interval_s = mt.periodic_interval_ms / 1000.0;
  const int num_periodic =
      mt.periodic_requests > 0 ? mt.periodic_requests : static_cast<int>(std::floor(arrivals.back() / interval_s)) + 1;
  for (int k = 0; k < num_periodic; ++k) {
    BenchPrompt p = tenant_prompt(periodic);
    p.output_len = draw_length(rng, o.output_len, o.range_ratio);
    timeline.push_back({k * interval_s, std::move(p)});
  }
  std::stable_sort(timeline.begin(), timeline.end(), [](const Timed& a, const Timed& b) { return a.at < b.at; });
  for (Timed& e : timeline) {
    e.prompt.prompt_len = static_cast<int>(e.prompt.ids.size());
    w.arrivals.push_back(e.at);
    w.prompts.push_back(std::move(e.prompt));
  }
  return w;
}

}  // namespace pagoda::bench
