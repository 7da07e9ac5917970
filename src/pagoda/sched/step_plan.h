// StepPlan: what one step computes, as decided by Scheduler::schedule(): per sequence, which of its
// tokens (start position and count, the last possibly a placeholder) and whether it samples; plus the
// sequences preempted while planning and those that finished since the previous plan, and the host-tier
// block copies that must run first. SequenceOutput:
// what update() reports.
#pragma once

#include <span>
#include <vector>

#include "pagoda/kv/host_tier.h"
#include "pagoda/sched/sequence.h"

namespace pagoda {

struct ScheduledSequence {
  SeqId seq_id = 0;
  // Valid until update() or abort(): the runner reads token_ids and the block table through it.
  const Sequence* seq = nullptr;
  int start_position = 0;  // = num_computed_tokens before the step: tokens already in the KV cache
  int num_tokens = 0;      // tokens computed this step, >= 1
  // The chunk reaches the end of the sequence: the last row's logits are sampled into a new token.
  // False for a prompt chunk that does not reach the end (chunked prefill).
  bool samples = false;
  // Trailing tokens of the chunk that are still placeholders when planned (0 or 1): sampled by the
  // step in flight, so their ids come from that step's samples (async scheduling).
  int num_placeholder_inputs = 0;

  // The chunk's tokens whose ids are known (all but the placeholder inputs). Read it before update().
  std::span<const TokenId> known_tokens() const {
    return std::span(seq->token_ids)
        .subspan(static_cast<size_t>(start_position), static_cast<size_t>(num_tokens - num_placeholder_inputs));
  }
};

struct StepPlan {
  std::vector<ScheduledSequence> seqs;  // running sequences first (policy order), then newly admitted
  int num_scheduled_tokens = 0;         // sum of seqs[i].num_tokens, <= max_num_batched_tokens
  std::vector<SeqId> preempted;         // preempted while planning: blocks freed, back in the waiting queue
  std::vector<SeqId> finished;          // finished or aborted since the previous plan (drop their state)
  // Host-tier block copies the step runs before its forward (evicted blocks out, host hits in).
  KvTransfers kv_transfers;

  bool empty() const { return seqs.empty(); }
  int num_sampling() const {
    int n = 0;
    for (const ScheduledSequence& s : seqs) n += s.samples;
    return n;
  }
};

// One sampled token of one sequence, as update() applied it.
struct SequenceOutput {
  SeqId seq_id = 0;
  TokenId token = 0;
  FinishReason finish_reason = FinishReason::kNone;  // kNone: still running
  int num_prompt_tokens = 0;
  int num_output_tokens = 0;  // including `token`
  int num_cached_tokens = 0;  // prompt tokens served by the prefix cache at first admission
  int sample_index = 0;       // index of `token` in update()'s `sampled` (the runner's output rows)
};

}  // namespace pagoda
