// Scheduling policies: the order in which waiting sequences are admitted and running sequences are
// served, and which running sequence is preempted first when KV blocks run out.
#pragma once

#include <climits>
#include <cstddef>
#include <span>
#include <string_view>

#include "pagoda/sched/output_lengths.h"
#include "pagoda/sched/sequence.h"
#include "pagoda/sched/slo_targets.h"

namespace pagoda {

enum class SchedulingPolicy : uint8_t {
  kFcfs,      // arrival order
  kPriority,  // lower Sequence::rank() (the tenant's priority, then the request's) first, then arrival order
  kSlo,       // served as kPriority; preempts by remaining work, sparing requests past their SLO (below); admits
              // within a priority those not past their SLO first (Scheduler::admission_order)
  kFair,      // decodes as kPriority; prompt work (admissions and prompt chunks) within a priority by the tenants'
              // weighted service (fair_share.h, Scheduler::schedule_fair); preempts from the tenant with the most
};

// "fcfs", "priority", "slo" or "fair"; throws pagoda::Error otherwise.
SchedulingPolicy parse_scheduling_policy(std::string_view name);
const char* to_string(SchedulingPolicy policy);

// A strict total order (arrival_index is unique): true when `a` is served before `b`.
bool schedules_before(SchedulingPolicy policy, const Sequence& a, const Sequence& b);

// Comparator for ordered containers of Sequence*.
struct PolicyOrder {
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  bool operator()(const Sequence* a, const Sequence* b) const { return schedules_before(policy, *a, *b); }
};

// What the slo policy's victim choice reads besides the candidates (fcfs and priority ignore it).
class FairShare;

struct PreemptionContext {
  const OutputLengthStats* output_lengths = nullptr;  // null: remaining work from max_tokens alone
  const FairShare* fair_share = nullptr;              // fair: the tenants' service (null: all equal)
  SloTargets slo{};                                   // zeros: no request is protected
  double now = 0;                                     // seconds, the clock of Sequence::submitted_s
  int max_model_len = INT_MAX;
};

// Whether `seq` has already missed its SLO at `now`: no output token yet and submitted more than the TTFT
// target ago, or tokens out and a time per output token so far above the TPOT target, the TPOT it would
// have if its next token came now: (now - first token) / output tokens. A zero target checks nothing.
bool past_slo(const Sequence& seq, const SloTargets& slo, double now);

// Index of the sequence to preempt first among `candidates` (non-empty).
// fcfs, priority: the one served last, i.e. the lowest priority, latest arrived.
// slo: among the candidates not past their SLO (all of them when every one is), the lowest priority (the
// largest value); within it the most estimated remaining decode steps (estimated_remaining_steps: max_tokens
// minus the tokens generated, capped by the tenant's observed output lengths); then the latest arrival.
// fair: the lowest priority; within it a sequence of the tenant with the most service (fair_share.h); then the
// latest arrival.
size_t pick_preemption_victim(SchedulingPolicy policy, std::span<Sequence* const> candidates,
                              const PreemptionContext& context = {});

}  // namespace pagoda
