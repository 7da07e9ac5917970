// FCFS and priority ordering of sequences.
#include "pagoda/sched/policy.h"

#include <tuple>

#include "pagoda/core/check.h"
#include "pagoda/core/error.h"

namespace pagoda {

SchedulingPolicy parse_scheduling_policy(std::string_view name) {
  if (name == "fcfs") return SchedulingPolicy::kFcfs;
  if (name == "priority") return SchedulingPolicy::kPriority;
  throw Error(fmt::format("unknown scheduling policy '{}' (expected fcfs or priority)", name));
}

const char* to_string(SchedulingPolicy policy) {
  return policy == SchedulingPolicy::kPriority ? "priority" : "fcfs";
}

bool schedules_before(SchedulingPolicy policy, const Sequence& a, const Sequence& b) {
  if (policy == SchedulingPolicy::kPriority) {
    return std::tie(a.priority, a.arrival_index) < std::tie(b.priority, b.arrival_index);
  }
  return a.arrival_index < b.arrival_index;
}

size_t pick_preemption_victim(SchedulingPolicy policy, std::span<Sequence* const> candidates) {
  PAGODA_CHECK(!candidates.empty());
  size_t victim = 0;
  for (size_t i = 1; i < candidates.size(); ++i) {
    if (schedules_before(policy, *candidates[victim], *candidates[i])) victim = i;
  }
  return victim;
}

}  // namespace pagoda
