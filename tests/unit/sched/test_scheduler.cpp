// Scheduler behaviour on small, hand-checked scenarios: chunked prefill, limits, prefix hits, salts,
// preemption by recompute, priority order, rejection, abort and stop checks.
#include "pagoda/sched/scheduler.h"

#include <gtest/gtest.h>

#include <map>

#include "pagoda/core/error.h"
#include "sched_test_util.h"

namespace pagoda {
namespace {

using test::fake_sample;
using test::fake_token;
using test::iota_tokens;
using test::make_request;

using Options = test::SchedulerOptions;
using test::make_scheduler;

// One simulated step: schedule, check, sample fake tokens, update.
StepPlan step(Scheduler& s, std::vector<SequenceOutput>* outputs = nullptr, const Scheduler::StopCheck& stop = {}) {
  StepPlan plan = s.schedule();
  test::expect_plan_valid(s, plan);
  const std::vector<TokenId> sampled = fake_sample(plan);
  std::vector<SequenceOutput> out = s.update(plan, sampled, stop);
  EXPECT_EQ(s.check_invariants(), "");
  if (outputs) *outputs = std::move(out);
  return plan;
}

// Runs expected.size() steps; step i must plan expected[i] (tokens by sequence).
void expect_steps(Scheduler& s, const std::vector<std::map<SeqId, int>>& expected) {
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(i);
    const StepPlan plan = step(s);
    std::map<SeqId, int> got;
    for (const auto& seq : plan.seqs) got[seq.seq_id] = seq.num_tokens;
    EXPECT_EQ(got, expected[i]);
  }
}

TEST(Scheduler, ChunkedPrefillThenDecodeUntilMaxTokens) {
  Scheduler s = make_scheduler({.max_num_seqs = 4, .max_num_batched_tokens = 4});
  s.add(make_request(1, iota_tokens(10), 3));
  const int expected_chunks[] = {4, 4, 2};
  for (int i = 0; i < 3; ++i) {
    const StepPlan plan = step(s);
    ASSERT_EQ(plan.seqs.size(), 1u);
    EXPECT_EQ(plan.seqs[0].start_position, 4 * i);
    EXPECT_EQ(plan.seqs[0].num_tokens, expected_chunks[i]);
    EXPECT_EQ(plan.seqs[0].samples, i == 2);
    EXPECT_EQ(plan.seqs[0].known_tokens()[0], 4 * i);
  }
  std::vector<SequenceOutput> out;
  step(s, &out);  // decode: the first output token
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].num_output_tokens, 2);
  EXPECT_EQ(out[0].finish_reason, FinishReason::kNone);
  const StepPlan last = step(s, &out);
  EXPECT_EQ(last.seqs[0].start_position, 11);
  EXPECT_EQ(last.seqs[0].num_tokens, 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].finish_reason, FinishReason::kLength);
  EXPECT_EQ(out[0].token, fake_token(1, 2));
  EXPECT_FALSE(s.has_unfinished());
  EXPECT_EQ(s.block_manager().usage(), 0.0);
  EXPECT_EQ(s.schedule().finished, std::vector<SeqId>{1});
}

TEST(Scheduler, RunningFirstThenWaitingWithinMaxNumSeqs) {
  Scheduler s = make_scheduler({.max_num_seqs = 2, .max_num_batched_tokens = 8});
  s.add(make_request(1, iota_tokens(3), 2));
  s.add(make_request(2, iota_tokens(3, 100), 2));
  s.add(make_request(3, iota_tokens(3, 200), 2));
  StepPlan plan = step(s);
  ASSERT_EQ(plan.seqs.size(), 2u);
  EXPECT_EQ(s.num_waiting(), 1);
  plan = step(s);  // both decode and finish
  EXPECT_EQ(s.num_running(), 0);
  plan = step(s);
  ASSERT_EQ(plan.seqs.size(), 1u);
  EXPECT_EQ(plan.seqs[0].seq_id, 3u);
}

// --long-prefill-token-threshold (vLLM's): no sequence computes more than the threshold of prompt tokens a step,
// so a long prompt leaves the rest of the budget to others; shorter prompts and decodes are not affected, and a
// negative threshold is refused.
TEST(Scheduler, LongPrefillThresholdCapsEachSequencesChunk) {
  Scheduler s = make_scheduler({.max_num_seqs = 4, .max_num_batched_tokens = 32, .long_prefill_token_threshold = 8});
  s.add(make_request(1, iota_tokens(20), 2));  // prompts without a common prefix: no prefix hits
  s.add(make_request(2, iota_tokens(6, 100), 2));
  s.add(make_request(3, iota_tokens(30, 200), 2));
  const std::vector<std::map<SeqId, int>> expected = {
      {{1, 8}, {2, 6}, {3, 8}},  // 22 of the 32 tokens: no sequence more than 8 (2's whole prompt)
      {{1, 8}, {2, 1}, {3, 8}},  // 2 decodes, and finishes with its second token
      {{1, 4}, {3, 8}},          // 1's last chunk
      {{1, 1}, {3, 6}},          // 1 decodes; 3's last chunk
  };
  expect_steps(s, expected);
  EXPECT_THROW(make_scheduler({.long_prefill_token_threshold = -1}), Error);
}

// --max-long-partial-prefills 1: one sequence a step with more than the threshold of its prompt left; the other long
// ones wait while short ones go ahead. Under fair a tenant's requests keep their order (here all are one tenant's):
// its next one waits behind its long one, and other tenants' go ahead (FairPolicy.MaxLongPartialPrefills...).
TEST(Scheduler, MaxLongPartialPrefillsLetsShortPromptsGoAhead) {
  for (const SchedulingPolicy policy : {SchedulingPolicy::kFcfs, SchedulingPolicy::kFair}) {
    const bool fair = policy == SchedulingPolicy::kFair;
    SCOPED_TRACE(fair ? "fair" : "fcfs");
    Scheduler s = make_scheduler({.max_num_seqs = 8, .max_num_batched_tokens = 64, .policy = policy,
                                  .long_prefill_token_threshold = 8, .max_long_partial_prefills = 1});
    s.add(make_request(1, iota_tokens(30), 2));  // long
    s.add(make_request(2, iota_tokens(30, 100), 2));  // long
    s.add(make_request(3, iota_tokens(6, 200), 2));  // short
    s.add(make_request(4, iota_tokens(20, 300), 2));  // long
    const std::vector<std::map<SeqId, int>> expected = fair ? std::vector<std::map<SeqId, int>>{
        {{1, 8}},  // 2 waits for the one long prefill of the step, and 3 behind it
        {{1, 8}},
        {{1, 8}},
        {{1, 6}, {2, 8}, {3, 6}},  // 1's last 6 are not a long prefill: 2 starts, 3 follows, 4 waits
        {{1, 1}, {2, 8}, {3, 1}},
        {{2, 8}},
        {{2, 6}, {4, 8}},
        {{2, 1}, {4, 8}},
        {{4, 4}},
        {{4, 1}},
    } : std::vector<std::map<SeqId, int>>{
        {{1, 8}, {3, 6}},  // 2 and 4 wait for the one long prefill of the step; 3 goes ahead of them
        {{1, 8}, {3, 1}},  // 3 decodes (and finishes)
        {{1, 8}},
        {{1, 6}, {2, 8}},  // 1's last 6 are not a long prefill: 2 starts
        {{1, 1}, {2, 8}},
        {{2, 8}},
        {{2, 6}, {4, 8}},
        {{2, 1}, {4, 8}},
        {{4, 4}},
        {{4, 1}},
    };
    expect_steps(s, expected);
    EXPECT_FALSE(s.has_unfinished());
  }
  EXPECT_THROW(make_scheduler({.max_long_partial_prefills = 1}), Error);  // without a threshold
  EXPECT_THROW(make_scheduler({.long_prefill_token_threshold = 8, .max_long_partial_prefills = -1}), Error);
}

TEST(Scheduler, DecodesArePlannedBeforeNewPromptChunks) {
  Scheduler s = make_scheduler({.max_num_seqs = 4, .max_num_batched_tokens = 6});
  s.add(make_request(1, iota_tokens(4), 10));
  step(s);
  s.add(make_request(2, iota_tokens(20, 100), 10));
  const StepPlan plan = step(s);
  ASSERT_EQ(plan.seqs.size(), 2u);
  EXPECT_EQ(plan.seqs[0].seq_id, 1u);
  EXPECT_EQ(plan.seqs[0].num_tokens, 1);
  EXPECT_EQ(plan.seqs[1].num_tokens, 5);  // the rest of the budget, as a chunk
  EXPECT_FALSE(plan.seqs[1].samples);
}

TEST(Scheduler, PrefixHitsShareFullBlocksAndRecomputeTheLastToken) {
  Scheduler s = make_scheduler({.block_size = 4});
  s.add(make_request(1, iota_tokens(10), 1));
  step(s);
  EXPECT_FALSE(s.has_unfinished());

  // Shares 9 tokens with request 1: two full blocks (8 tokens) are hits.
  std::vector<TokenId> p2 = iota_tokens(9);
  p2.push_back(500);
  p2.push_back(501);
  s.add(make_request(2, p2, 1));
  std::vector<SequenceOutput> out;
  StepPlan plan = step(s, &out);
  EXPECT_EQ(plan.seqs[0].start_position, 8);
  EXPECT_EQ(plan.seqs[0].num_tokens, 3);
  EXPECT_EQ(out[0].num_cached_tokens, 8);

  // The same prompt as request 1, whose length is not a block multiple: 8 cached tokens.
  // A prompt of exactly 8 tokens (two full cached blocks) still recomputes its last block.
  s.add(make_request(3, iota_tokens(8), 1));
  plan = step(s);
  EXPECT_EQ(plan.seqs[0].start_position, 4);
  EXPECT_EQ(plan.seqs[0].num_tokens, 4);

  const PrefixCacheStats& stats = s.block_manager().prefix_cache_stats();
  EXPECT_EQ(stats.num_queries, 3u);
  EXPECT_EQ(stats.num_queried_tokens, 10u + 11u + 8u);
  EXPECT_EQ(stats.num_hit_tokens, 8u + 4u);
}

TEST(Scheduler, RunningSequencesShareBlocks) {
  Scheduler s = make_scheduler({.block_size = 4});
  s.add(make_request(1, iota_tokens(9), 20));
  step(s);  // prompt computed and published
  s.add(make_request(2, iota_tokens(9), 20));
  step(s);
  const Sequence* a = s.find(1);
  const Sequence* b = s.find(2);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->block_table()[0], b->block_table()[0]);
  EXPECT_EQ(a->block_table()[1], b->block_table()[1]);
  EXPECT_NE(a->block_table()[2], b->block_table()[2]);
  EXPECT_EQ(s.block_manager().pool().ref_count(a->block_table()[0]), 2);
}

TEST(Scheduler, DifferentSaltsDoNotShare) {
  Scheduler s = make_scheduler({.block_size = 4});
  s.add(make_request(1, iota_tokens(10), 1, 0, "tenant-a"));
  step(s);
  s.add(make_request(2, iota_tokens(10), 1, 0, "tenant-b"));
  StepPlan plan = step(s);
  EXPECT_EQ(plan.seqs[0].start_position, 0);
  s.add(make_request(3, iota_tokens(10), 1, 0, "tenant-a"));
  plan = step(s);
  EXPECT_EQ(plan.seqs[0].start_position, 8);
}

TEST(Scheduler, PrefixCachingDisabledMeansNoHits) {
  Scheduler s = make_scheduler({.block_size = 4, .prefix_caching = false});
  for (SeqId id = 1; id <= 3; ++id) {
    s.add(make_request(id, iota_tokens(10), 2));
    while (s.has_unfinished()) {
      const StepPlan plan = step(s);
      if (!plan.seqs.empty() && plan.seqs[0].num_tokens > 1) {
        EXPECT_EQ(plan.seqs[0].start_position, 0);
      }
    }
  }
  EXPECT_EQ(s.block_manager().prefix_cache_stats().num_hit_tokens, 0u);
  EXPECT_EQ(s.block_manager().pool().num_cached_blocks(), 0);
}

TEST(Scheduler, TinyPoolPreemptsLatestArrivalWhichResumesWithItsTokens) {
  // 4 blocks of 4 tokens. Each request needs up to 13 slots (4 blocks) alone; together they cannot.
  Scheduler s = make_scheduler({.num_blocks = 4, .block_size = 4, .max_model_len = 64});
  s.add(make_request(1, iota_tokens(6), 8));
  s.add(make_request(2, iota_tokens(6, 100), 8));
  std::map<SeqId, std::vector<TokenId>> outputs;
  bool saw_preemption = false;
  int num_steps = 0;
  while (s.has_unfinished() && num_steps++ < 100) {
    std::vector<SequenceOutput> out;
    const StepPlan plan = step(s, &out);
    for (SeqId id : plan.preempted) {
      EXPECT_EQ(id, 2u) << "the later arrival is preempted";
      saw_preemption = true;
      const Sequence* seq = s.find(id);
      ASSERT_NE(seq, nullptr);
      EXPECT_EQ(seq->status, SeqStatus::kPreempted);
      EXPECT_EQ(seq->num_computed_tokens, 0);
      EXPECT_EQ(seq->blocks.num_blocks(), 0);
      EXPECT_EQ(seq->output_token_ids().size(), outputs[id].size()) << "generated tokens are kept";
    }
    for (const SequenceOutput& o : out) outputs[o.seq_id].push_back(o.token);
  }
  EXPECT_TRUE(saw_preemption);
  EXPECT_FALSE(s.has_unfinished());
  EXPECT_GE(s.num_preemptions(), 1u);
  for (SeqId id : {1, 2}) {
    ASSERT_EQ(outputs[id].size(), 8u);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(outputs[id][i], fake_token(id, i));
  }
}

TEST(Scheduler, TheLastSequenceInPolicyOrderPreemptsItselfAndResumes) {
  // 3 blocks of 2 tokens. Request 1 (higher priority) never needs a third block; request 2 needs a
  // second block at step 2, and the only candidate left to preempt is itself.
  Scheduler s = make_scheduler(
      {.num_blocks = 3, .block_size = 2, .max_model_len = 64, .policy = SchedulingPolicy::kPriority});
  s.add(make_request(1, iota_tokens(3), 2, /*priority=*/0));
  s.add(make_request(2, {100, 101}, 3, /*priority=*/1));
  StepPlan plan = step(s);
  EXPECT_EQ(plan.seqs.size(), 2u);
  plan = step(s);
  EXPECT_EQ(plan.preempted, std::vector<SeqId>{2});
  ASSERT_EQ(plan.seqs.size(), 1u);
  EXPECT_EQ(plan.seqs[0].seq_id, 1u);
  const Sequence* two = s.find(2);
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->status, SeqStatus::kPreempted);
  EXPECT_EQ(two->num_output_tokens(), 1);
  EXPECT_FALSE(s.find(1));  // finished: 2 output tokens

  // Request 2 resumes: its first block [100, 101] is still cached, its output token is recomputed.
  plan = step(s);
  ASSERT_EQ(plan.seqs.size(), 1u);
  EXPECT_EQ(plan.seqs[0].start_position, 2);
  EXPECT_EQ(plan.seqs[0].num_tokens, 1);
  EXPECT_TRUE(plan.seqs[0].samples);
  int num_steps = 0;
  while (s.has_unfinished() && num_steps++ < 10) step(s);
  EXPECT_FALSE(s.has_unfinished());
  EXPECT_EQ(s.num_preemptions(), 1u);
}

TEST(Scheduler, PriorityPolicyAdmitsLowerValuesFirst) {
  Scheduler s = make_scheduler({.max_num_seqs = 1, .policy = SchedulingPolicy::kPriority});
  s.add(make_request(1, iota_tokens(3), 1, /*priority=*/5));
  s.add(make_request(2, iota_tokens(3), 1, /*priority=*/0));
  s.add(make_request(3, iota_tokens(3), 1, /*priority=*/5));
  s.add(make_request(4, iota_tokens(3), 1, /*priority=*/-1));
  std::vector<SeqId> order;
  while (s.has_unfinished()) {
    const StepPlan plan = step(s);
    for (const ScheduledSequence& e : plan.seqs) order.push_back(e.seq_id);
  }
  EXPECT_EQ(order, (std::vector<SeqId>{4, 2, 1, 3}));
}

TEST(Scheduler, FcfsIgnoresPriority) {
  Scheduler s = make_scheduler({.max_num_seqs = 1});
  s.add(make_request(1, iota_tokens(3), 1, 5));
  s.add(make_request(2, iota_tokens(3), 1, 0));
  std::vector<SeqId> order;
  while (s.has_unfinished()) {
    for (const ScheduledSequence& e : step(s).seqs) order.push_back(e.seq_id);
  }
  EXPECT_EQ(order, (std::vector<SeqId>{1, 2}));
}

TEST(Scheduler, RejectsRequestsThatCanNeverRun) {
  Scheduler s = make_scheduler({.num_blocks = 4, .block_size = 4, .max_model_len = 32});
  EXPECT_THROW(s.add(make_request(1, {}, 4)), InvalidRequest);
  EXPECT_THROW(s.add(make_request(2, iota_tokens(4), 0)), InvalidRequest);
  try {
    s.add(make_request(3, iota_tokens(32), 4));
    FAIL() << "prompt of max_model_len tokens accepted";
  } catch (const InvalidRequest& e) {
    EXPECT_NE(std::string(e.what()).find("32"), std::string::npos) << e.what();
  }
  try {
    s.add(make_request(5, iota_tokens(20), 1));
    FAIL() << "prompt larger than the pool accepted";
  } catch (const InvalidRequest& e) {
    EXPECT_NE(std::string(e.what()).find("4 blocks"), std::string::npos) << e.what();
  }
  // 10 + up to 7 new tokens needs 16 slots = 4 blocks: fits. 10 + 8 needs 17 slots: does not.
  EXPECT_NO_THROW(s.add(make_request(6, iota_tokens(10), 7)));
  EXPECT_THROW(s.add(make_request(7, iota_tokens(10), 8)), InvalidRequest);
  EXPECT_THROW(s.add(make_request(6, iota_tokens(3), 1)), InvalidRequest);  // id in use
}

TEST(Scheduler, AbortFreesBlocksOfWaitingAndRunningSequences) {
  Scheduler s = make_scheduler({.max_num_seqs = 1});
  s.add(make_request(1, iota_tokens(10), 50));
  s.add(make_request(2, iota_tokens(10, 100), 50));
  step(s);
  EXPECT_GT(s.block_manager().usage(), 0.0);
  EXPECT_TRUE(s.abort(2));  // waiting
  EXPECT_TRUE(s.abort(1));  // running
  EXPECT_FALSE(s.abort(1));
  EXPECT_FALSE(s.abort(99));
  EXPECT_EQ(s.check_invariants(), "");
  EXPECT_EQ(s.block_manager().usage(), 0.0);
  EXPECT_FALSE(s.has_unfinished());
  EXPECT_EQ(s.schedule().finished, (std::vector<SeqId>{2, 1}));
}

TEST(Scheduler, UpdateSkipsSequencesAbortedAfterPlanning) {
  Scheduler s = make_scheduler({});
  s.add(make_request(1, iota_tokens(5), 5));
  s.add(make_request(2, iota_tokens(5, 50), 5));
  const StepPlan plan = s.schedule();
  const std::vector<TokenId> sampled = fake_sample(plan);
  EXPECT_TRUE(s.abort(1));
  const std::vector<SequenceOutput> out = s.update(plan, sampled);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seq_id, 2u);
  EXPECT_EQ(s.check_invariants(), "");
}

TEST(Scheduler, StopCheckFinishesWithStop) {
  Scheduler s = make_scheduler({});
  s.add(make_request(1, iota_tokens(5), 50));
  const TokenId eos = fake_token(1, 2);
  const auto stop = [&](const Sequence& seq) { return seq.token_ids.back() == eos; };
  std::vector<SequenceOutput> out;
  int n = 0;
  while (s.has_unfinished()) {
    step(s, &out, stop);
    ++n;
  }
  EXPECT_EQ(n, 3);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].finish_reason, FinishReason::kStop);
  EXPECT_EQ(out[0].num_output_tokens, 3);
}

TEST(Scheduler, MaxModelLenStopsGeneration) {
  Scheduler s = make_scheduler({.max_model_len = 8});
  s.add(make_request(1, iota_tokens(5), 100));
  std::vector<SequenceOutput> out;
  while (s.has_unfinished()) step(s, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].num_output_tokens, 3);
  EXPECT_EQ(out[0].finish_reason, FinishReason::kLength);
}

}  // namespace
}  // namespace pagoda
