// FCFS, priority and slo ordering of sequences, and preemption victims.
#include "pagoda/sched/policy.h"

#include <tuple>
#include <vector>

#include "pagoda/core/check.h"
#include "pagoda/core/error.h"
#include "pagoda/sched/fair_share.h"

namespace pagoda {

SchedulingPolicy parse_scheduling_policy(std::string_view name) {
  if (name == "fcfs") return SchedulingPolicy::kFcfs;
  if (name == "priority") return SchedulingPolicy::kPriority;
  if (name == "slo") return SchedulingPolicy::kSlo;
  if (name == "fair") return SchedulingPolicy::kFair;
  throw Error(fmt::format("unknown scheduling policy '{}' (expected fcfs, priority, slo or fair)", name));
}

const char* to_string(SchedulingPolicy policy) {
  switch (policy) {
    case SchedulingPolicy::kFcfs: return "fcfs";
    case SchedulingPolicy::kPriority: return "priority";
    case SchedulingPolicy::kSlo: return "slo";
    case SchedulingPolicy::kFair: return "fair";
  }
  return "?";
}

bool schedules_before(SchedulingPolicy policy, const Sequence& a, const Sequence& b) {
  if (policy != SchedulingPolicy::kFcfs) {
    return std::make_tuple(a.rank(), a.arrival_index) < std::make_tuple(b.rank(), b.arrival_index);
  }
  return a.arrival_index < b.arrival_index;
}

bool past_slo(const Sequence& seq, const SloTargets& slo, double now) {
  const int outputs = seq.num_output_tokens();
  if (outputs == 0) return slo.ttft_seconds > 0 && now - seq.submitted_s > slo.ttft_seconds;
  return slo.tpot_seconds > 0 && seq.first_token_s && (now - *seq.first_token_s) / outputs > slo.tpot_seconds;
}

namespace {

// The slo rule among `candidates` (all unprotected, or all protected).
size_t pick_by_remaining_work(std::span<Sequence* const> candidates, std::span<const size_t> among,
                              const PreemptionContext& context) {
  const auto key = [&](size_t i) {
    const Sequence& s = *candidates[i];
    return std::make_tuple(s.rank(), estimated_remaining_steps(s, context.output_lengths, context.max_model_len),
                           s.arrival_index);
  };
  size_t victim = among[0];
  auto best = key(victim);
  for (size_t i : among.subspan(1)) {
    const auto k = key(i);
    if (best < k) {
      victim = i;
      best = k;
    }
  }
  return victim;
}

}  // namespace

size_t pick_preemption_victim(SchedulingPolicy policy, std::span<Sequence* const> candidates,
                              const PreemptionContext& context) {
  PAGODA_CHECK(!candidates.empty());
  if (policy == SchedulingPolicy::kSlo) {
    std::vector<size_t> unprotected, all;
    for (size_t i = 0; i < candidates.size(); ++i) {
      all.push_back(i);
      if (!past_slo(*candidates[i], context.slo, context.now)) unprotected.push_back(i);
    }
    return pick_by_remaining_work(candidates, unprotected.empty() ? all : unprotected, context);
  }
  if (policy == SchedulingPolicy::kFair) {
    const auto key = [&](size_t i) {
      const Sequence& s = *candidates[i];
      const double service = context.fair_share ? context.fair_share->service(s.tenant.name) : 0.0;
      return std::make_tuple(s.rank(), service, s.arrival_index);
    };
    size_t victim = 0;
    for (size_t i = 1; i < candidates.size(); ++i)
      if (key(victim) < key(i)) victim = i;
    return victim;
  }
  size_t victim = 0;
  for (size_t i = 1; i < candidates.size(); ++i) {
    if (schedules_before(policy, *candidates[victim], *candidates[i])) victim = i;
  }
  return victim;
}

}  // namespace pagoda
