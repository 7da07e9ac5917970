// ArrivalRates (arrival_rate.h).
#include "pagoda/sched/arrival_rate.h"

#include <algorithm>
#include <cmath>

namespace pagoda {

double ArrivalRates::Ewma::at(double now, double tau) const {
  if (!seen) return 0;
  return value * std::exp(-std::max(0.0, now - last) / tau);
}

void ArrivalRates::Ewma::add(double now, double tau) {
  value = at(now, tau) + 1.0 / tau;
  last = now;
  seen = true;
}

void ArrivalRates::arrive(double now_seconds, const std::string& tenant, int prompt_tokens) {
  all_.add(now_seconds, tau_);
  if (tenants_.count(tenant) > 0 || tenants_.size() < kMaxTenants) tenants_[tenant].add(now_seconds, tau_);
  constexpr double kAlpha = 0.1;  // about the last ten arrivals
  mean_prompt_tokens_ = any_ ? (1 - kAlpha) * mean_prompt_tokens_ + kAlpha * prompt_tokens : prompt_tokens;
  any_ = true;
}

double ArrivalRates::tenant_rate(double now_seconds, const std::string& tenant) const {
  const auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.at(now_seconds, tau_);
}

std::map<std::string, double> ArrivalRates::tenant_rates(double now_seconds) const {
  std::map<std::string, double> out;
  for (const auto& [name, e] : tenants_) out[name] = e.at(now_seconds, tau_);
  return out;
}

}  // namespace pagoda
