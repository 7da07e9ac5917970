// FairShare: per-tenant service counters and waiting queues of the fair policy.
#include "pagoda/sched/fair_share.h"

#include <algorithm>
#include <limits>

#include "pagoda/core/check.h"

namespace pagoda {

FairShare::Tenant& FairShare::tenant(const std::string& name) {
  return tenants_.try_emplace(name, order_).first->second;
}

void FairShare::added(const Sequence& seq) {
  Tenant& t = tenant(seq.tenant.name);
  if (t.unfinished++ > 0) return;
  double floor = std::numeric_limits<double>::infinity();
  for (const auto& [name, other] : tenants_)
    if (other.unfinished > 0 && &other != &t) floor = std::min(floor, other.service);
  t.service = std::max(t.service, num_active_ > 0 ? floor : idle_floor_);
  ++num_active_;
}

void FairShare::finished(const Sequence& seq) {
  Tenant& t = tenant(seq.tenant.name);
  PAGODA_CHECK(t.unfinished > 0, "tenant '{}' has no unfinished sequence", seq.tenant.name);
  if (--t.unfinished > 0) return;
  if (--num_active_ == 0) idle_floor_ = std::max(idle_floor_, t.service);
}

void FairShare::enqueue(Sequence* seq) {
  tenant(seq->tenant.name).waiting.insert(seq);
  waiting_tenants_.insert(seq->tenant.name);
}

void FairShare::dequeue(Sequence* seq) {
  Queue& queue = tenant(seq->tenant.name).waiting;
  queue.erase(seq);
  if (queue.empty()) waiting_tenants_.erase(seq->tenant.name);
}

void FairShare::charge(const Sequence& seq, int num_tokens) {
  tenant(seq.tenant.name).service += num_tokens / static_cast<double>(seq.tenant.weight);
}

double FairShare::service(const std::string& name) const {
  const auto it = tenants_.find(name);
  return it == tenants_.end() ? 0 : it->second.service;
}

const FairShare::Queue* FairShare::waiting(const std::string& name) const {
  const auto it = tenants_.find(name);
  return it == tenants_.end() || it->second.waiting.empty() ? nullptr : &it->second.waiting;
}

}  // namespace pagoda
