// Helpers for scheduler tests: a simulated model that "samples" a token determined by the sequence and
// position (so outputs can be checked across preemptions), and per-plan checks of the step limits.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "pagoda/sched/scheduler.h"

namespace pagoda::test {

inline std::vector<TokenId> iota_tokens(int n, TokenId first = 0) {
  std::vector<TokenId> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// The token the fake model samples for `seq_id` at output position `output_index`.
inline TokenId fake_token(SeqId seq_id, int output_index) {
  return static_cast<TokenId>((seq_id * 7919 + static_cast<uint64_t>(output_index) * 104729) % 1000 + 1000);
}

// A scheduler with small, hand-checkable limits.
struct SchedulerOptions {
  int num_blocks = 64;
  int block_size = 4;
  int max_num_seqs = 8;
  int max_num_batched_tokens = 32;
  int max_model_len = 128;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  bool prefix_caching = true;
  int long_prefill_token_threshold = 0;
  int max_long_partial_prefills = 0;
};

inline Scheduler make_scheduler(const SchedulerOptions& o) {
  SchedulerConfig config{o.max_num_seqs, o.max_num_batched_tokens, o.max_model_len, o.policy};
  config.long_prefill_token_threshold = o.long_prefill_token_threshold;
  config.max_long_partial_prefills = o.max_long_partial_prefills;
  return Scheduler(config, BlockManagerOptions{o.num_blocks, o.block_size, o.prefix_caching});
}

inline SequenceRequest make_request(SeqId seq_id, std::vector<TokenId> prompt, int max_tokens, int priority = 0,
                                    std::string salt = {}) {
  SequenceRequest r;
  r.seq_id = seq_id;
  r.prompt_token_ids = std::move(prompt);
  r.max_tokens = max_tokens;
  r.priority = priority;
  r.cache_salt = std::move(salt);
  return r;
}

// Checks one plan against the config: token budget, max_num_seqs, chunk bounds, sampling flags.
inline void expect_plan_valid(const Scheduler& s, const StepPlan& plan) {
  int total = 0;
  std::set<SeqId> ids;
  const int bs = s.block_manager().block_size();
  for (const ScheduledSequence& e : plan.seqs) {
    EXPECT_TRUE(ids.insert(e.seq_id).second) << "sequence " << e.seq_id << " planned twice";
    const Sequence* seq = s.find(e.seq_id);
    ASSERT_NE(seq, nullptr);
    EXPECT_EQ(seq, e.seq);
    const int end = e.start_position + e.num_tokens;
    EXPECT_GE(e.num_tokens, 1);
    EXPECT_EQ(end, seq->num_computed_tokens) << "planned tokens count as computed";
    // A sampling entry added the placeholder for its token, the last one.
    EXPECT_LE(end + (e.samples ? 1 : 0), seq->num_tokens_with_placeholders());
    if (e.samples) {
      EXPECT_EQ(end + 1, seq->num_tokens_with_placeholders());
      EXPECT_GE(seq->num_output_placeholders, 1);
    }
    EXPECT_EQ(e.num_placeholder_inputs, std::max(0, end - seq->num_tokens()));
    EXPECT_LE(e.num_placeholder_inputs, 1);
    EXPECT_GE(seq->blocks.num_blocks() * bs, e.start_position + e.num_tokens) << "blocks do not cover the chunk";
    total += e.num_tokens;
  }
  EXPECT_EQ(total, plan.num_scheduled_tokens);
  EXPECT_LE(plan.num_scheduled_tokens, s.config().max_num_batched_tokens);
  EXPECT_LE(static_cast<int>(plan.seqs.size()), s.config().max_num_seqs);
}

// Samples fake tokens for the plan's sampling entries, in plan order (call it right after schedule(), as
// a runner would launch the step). The token's output index follows from the chunk alone (its position
// minus the prompt), so placeholders from a step in flight do not change it.
inline std::vector<TokenId> fake_sample(const StepPlan& plan) {
  std::vector<TokenId> out;
  for (const ScheduledSequence& e : plan.seqs) {
    if (e.samples) out.push_back(fake_token(e.seq_id, e.start_position + e.num_tokens - e.seq->num_prompt_tokens));
  }
  return out;
}

}  // namespace pagoda::test
