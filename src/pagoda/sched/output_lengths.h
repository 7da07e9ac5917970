// Observed output lengths of finished requests, per tenant and engine-wide: the slo scheduling policy's
// estimate of how many decode steps a running request has left (policy.h).
//
// The rule: each estimate (one per tenant name, one for the engine) is the running mean of the first
// kWindow (16) lengths recorded, then an EWMA with weight 1/kWindow, i.e. mean += (x - mean) / min(n, 16)
// for the n-th length x. It learns a tenant's mean exactly from its first requests and follows a drift
// after that. A request's expected output length is its tenant's estimate, the engine's for a tenant with no
// finished request yet (or a request without tenant), and none before any request has finished.
//
// estimated_remaining_steps: max_tokens minus the tokens generated so far (placeholders counted), capped by
// the expected length minus them and by max_model_len, and at least 1 (the request is unfinished):
//   remaining = max(1, min(max_tokens - g, max_model_len - tokens, round(expected) - g))
// so a request with max_tokens 4096 whose tenant's outputs average 200 tokens has about 200 steps left, and
// one already past its tenant's mean is expected to end soon.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "pagoda/sched/sequence.h"

namespace pagoda {

class OutputLengthStats {
 public:
  static constexpr int64_t kWindow = 16;

  // A finished request's output tokens (>= 0). Tenant "": the engine's estimate only. Tenant names are the
  // configured tenants' (a bounded set).
  void record(const std::string& tenant, int output_tokens);
  // The expected output length of a request of `tenant` (see above); nullopt before any recorded length.
  std::optional<double> expected(const std::string& tenant) const;
  std::optional<double> engine_mean() const { return engine_.mean(); }
  // Lengths recorded for `tenant` ("" : for the engine, all of them).
  int64_t num_recorded(const std::string& tenant) const;

 private:
  struct Estimate {
    double value = 0;
    int64_t n = 0;
    void add(double x);
    std::optional<double> mean() const { return n > 0 ? std::optional<double>(value) : std::nullopt; }
  };
  Estimate engine_;
  std::unordered_map<std::string, Estimate> tenants_;
};

// Decode steps `seq` is expected to have left (see above); `lengths` null: from max_tokens alone.
int64_t estimated_remaining_steps(const Sequence& seq, const OutputLengthStats* lengths, int max_model_len);

}  // namespace pagoda
