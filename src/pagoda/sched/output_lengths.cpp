// Per-tenant output-length estimates and a request's remaining decode steps (the rule: output_lengths.h).
#include "pagoda/sched/output_lengths.h"

#include <algorithm>
#include <cmath>

namespace pagoda {

void OutputLengthStats::Estimate::add(double x) {
  ++n;
  value += (x - value) / static_cast<double>(std::min(n, kWindow));
}

void OutputLengthStats::record(const std::string& tenant, int output_tokens) {
  const double x = std::max(0, output_tokens);
  engine_.add(x);
  if (!tenant.empty()) tenants_[tenant].add(x);
}

std::optional<double> OutputLengthStats::expected(const std::string& tenant) const {
  if (!tenant.empty()) {
    const auto it = tenants_.find(tenant);
    if (it != tenants_.end() && it->second.n > 0) return it->second.value;
  }
  return engine_.mean();
}

int64_t OutputLengthStats::num_recorded(const std::string& tenant) const {
  if (tenant.empty()) return engine_.n;
  const auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.n;
}

int64_t estimated_remaining_steps(const Sequence& seq, const OutputLengthStats* lengths, int max_model_len) {
  const int64_t generated = seq.num_output_tokens_with_placeholders();
  int64_t remaining = std::min<int64_t>(seq.max_tokens - generated, max_model_len - seq.num_tokens_with_placeholders());
  if (lengths != nullptr) {
    if (const std::optional<double> expected = lengths->expected(seq.tenant.name)) {
      remaining = std::min<int64_t>(remaining, static_cast<int64_t>(std::llround(*expected)) - generated);
    }
  }
  return std::max<int64_t>(1, remaining);
}

}  // namespace pagoda
