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
  // The TTL batching window (--batch-wait-ms; Scheduler::hold_new_requests): while a step would compute no
  // prompt tokens (the engine idle or only decoding), new requests wait up to batch_wait_seconds from their
  // submission, so that prompts arriving close together are prefilled in one step instead of one each; with a
  // TTFT target (batch_wait_ttft_seconds > 0) never past that target less the predicted time to a first token.
  // 0: off.
  double batch_wait_seconds = 0;
  double batch_wait_ttft_seconds = 0;
  // The most prompt tokens one sequence computes a step (--long-prefill-token-threshold, as vLLM's: a longer
  // prompt goes in chunks of this many, leaving the rest of the step's budget to other requests). 0: off.
  int long_prefill_token_threshold = 0;
  // The most sequences one step gives a chunk to while more than long_prefill_token_threshold of their prompt is
  // left to compute (--max-long-partial-prefills, as vLLM's): the others wait, and shorter prompts go ahead of
  // them, so a flood of long prompts leaves each step's budget to short ones. 0: no limit. Needs the threshold.
  int max_long_partial_prefills = 0;
};

// Throws pagoda::Error naming the bad value. max_num_batched_tokens must be >= max_num_seqs so that a
// full batch of decoding sequences can always run together (otherwise the last ones would starve).
void validate(const SchedulerConfig& config);

}  // namespace pagoda
