// Arrival rates as exponentially weighted moving averages over time (not over arrivals): each arrival adds
// 1 / tau to a rate that decays as exp(-dt / tau), so a steady rate r reads r, and a step from r to r' is
// followed within about tau seconds. One rate per tenant and one for all; the batch controller reads the
// latter, /metrics shows both. The mean prompt length of arrivals is kept beside it (an EWMA over arrivals).
#pragma once

#include <map>
#include <string>

namespace pagoda {

class ArrivalRates {
 public:
  explicit ArrivalRates(double tau_seconds = 5.0) : tau_(tau_seconds) {}

  // A request arrived at `now_seconds` (any monotonic clock) with this tenant ("" for none) and prompt length.
  void arrive(double now_seconds, const std::string& tenant, int prompt_tokens);
  // Requests per second at `now_seconds`: all, and one tenant's.
  double rate(double now_seconds) const { return all_.at(now_seconds, tau_); }
  double tenant_rate(double now_seconds, const std::string& tenant) const;
  // Per tenant, at `now_seconds`.
  std::map<std::string, double> tenant_rates(double now_seconds) const;
  double mean_prompt_tokens() const { return mean_prompt_tokens_; }

 private:
  struct Ewma {
    double value = 0, last = 0;
    bool seen = false;
    double at(double now, double tau) const;
    void add(double now, double tau);
  };
  static constexpr size_t kMaxTenants = 256;  // bounded: tenants come from a config file, but be safe
  double tau_;
  Ewma all_;
  std::map<std::string, Ewma> tenants_;
  double mean_prompt_tokens_ = 0;
  bool any_ = false;
};

}  // namespace pagoda
