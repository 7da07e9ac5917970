// SchedulerConfig: the per-step limits and the policy. KV pool options live in BlockManagerOptions.
#pragma once

#include "pagoda/sched/policy.h"

namespace pagoda {

struct SchedulerConfig {
  int max_num_seqs = 256;             // running sequences at once (so also sequences per step)
  int max_num_batched_tokens = 2048;  // tokens computed per step (the token budget)
  int max_model_len = 2048;           // prompt + output tokens of one sequence
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  // With the slo policy: a running request already past these targets is preempted only when every
  // candidate is (policy.h), and, within a priority, waiting requests that can still make them are admitted
  // before those already past them (Scheduler::admission_order). Zeros: none.
  SloTargets slo{};
};

// Throws pagoda::Error naming the bad value. max_num_batched_tokens must be >= max_num_seqs so that a
// full batch of decoding sequences can always run together (otherwise the last ones would starve).
void validate(const SchedulerConfig& config);

}  // namespace pagoda
