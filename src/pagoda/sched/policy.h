// Scheduling policies: the order in which waiting sequences are admitted and running sequences are
// served, and (the reverse) which running sequence is preempted first when KV blocks run out.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "pagoda/sched/sequence.h"

namespace pagoda {

enum class SchedulingPolicy : uint8_t {
  kFcfs,      // arrival order
  kPriority,  // lower `priority` first, then arrival order
};

// "fcfs" or "priority"; throws pagoda::Error otherwise.
SchedulingPolicy parse_scheduling_policy(std::string_view name);
const char* to_string(SchedulingPolicy policy);

// A strict total order (arrival_index is unique): true when `a` is served before `b`.
bool schedules_before(SchedulingPolicy policy, const Sequence& a, const Sequence& b);

// Comparator for ordered containers of Sequence*.
struct PolicyOrder {
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  bool operator()(const Sequence* a, const Sequence* b) const { return schedules_before(policy, *a, *b); }
};

// Index of the sequence to preempt first among `candidates` (non-empty): the one served last, i.e.
// the lowest priority, latest arrived.
size_t pick_preemption_victim(SchedulingPolicy policy, std::span<Sequence* const> candidates);

}  // namespace pagoda
