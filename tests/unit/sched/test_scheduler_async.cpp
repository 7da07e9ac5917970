// Async scheduling in the scheduler: a step is planned before the previous step's tokens are applied.
// The token it samples is a placeholder: the next plan computes it as an input, counts it against
// max_tokens / max_model_len, keeps it across preemption, drops it after a stop or an abort, and
// publishes the block it completes only once its id is known.
#include <gtest/gtest.h>

#include <map>

#include "pagoda/sched/scheduler.h"
#include "sched_test_util.h"

namespace pagoda {
namespace {

using test::fake_sample;
using test::fake_token;
using test::iota_tokens;
using test::make_request;

using Options = test::SchedulerOptions;
using test::make_scheduler;

// A planned step and the tokens the fake model sampled for it at launch.
struct Launched {
  StepPlan plan;
  std::vector<TokenId> sampled;
};

Launched launch(Scheduler& s) {
  Launched l;
  l.plan = s.schedule();
  test::expect_plan_valid(s, l.plan);
  EXPECT_EQ(s.check_invariants(), "");
  l.sampled = fake_sample(l.plan);
  return l;
}

std::vector<SequenceOutput> apply(Scheduler& s, const Launched& l, const Scheduler::StopCheck& stop = {}) {
  std::vector<SequenceOutput> out = s.update(l.plan, l.sampled, stop);
  EXPECT_EQ(s.check_invariants(), "");
  return out;
}

// Runs to completion with one step in flight; returns each sequence's tokens, and counts how often each
// sequence was planned.
struct AsyncRun {
  std::map<SeqId, std::vector<TokenId>> tokens;
  std::map<SeqId, FinishReason> reasons;
  std::map<SeqId, int> num_planned;
};

AsyncRun run_async(Scheduler& s, const Scheduler::StopCheck& stop = {}) {
  AsyncRun run;
  Launched in_flight;  // an empty plan: none
  for (int i = 0; i < 1000 && (s.has_unfinished() || !in_flight.plan.empty()); ++i) {
    Launched next = launch(s);
    for (const ScheduledSequence& e : next.plan.seqs) ++run.num_planned[e.seq_id];
    EXPECT_TRUE(!next.plan.empty() || !in_flight.plan.empty()) << "no progress";
    for (const SequenceOutput& o : apply(s, in_flight, stop)) {
      run.tokens[o.seq_id].push_back(o.token);
      if (o.finish_reason != FinishReason::kNone) run.reasons[o.seq_id] = o.finish_reason;
    }
    in_flight = std::move(next);
  }
  EXPECT_FALSE(s.has_unfinished());
  return run;
}

TEST(SchedulerAsync, ThePlaceholderIsTheNextStepsInput) {
  Scheduler s = make_scheduler({});
  s.add(make_request(1, iota_tokens(5), 10));
  const Launched first = launch(s);
  ASSERT_EQ(first.plan.seqs.size(), 1u);
  EXPECT_TRUE(first.plan.seqs[0].samples);
  EXPECT_EQ(first.plan.seqs[0].num_placeholder_inputs, 0);
  const Sequence* seq = s.find(1);
  EXPECT_EQ(seq->num_computed_tokens, 5);
  EXPECT_EQ(seq->num_output_placeholders, 1);

  // Planned before the first token is known: it computes position 5, whose input is that token.
  const Launched second = launch(s);
  ASSERT_EQ(second.plan.seqs.size(), 1u);
  const ScheduledSequence& e = second.plan.seqs[0];
  EXPECT_EQ(e.start_position, 5);
  EXPECT_EQ(e.num_tokens, 1);
  EXPECT_TRUE(e.samples);
  EXPECT_EQ(e.num_placeholder_inputs, 1);
  EXPECT_TRUE(e.known_tokens().empty());
  EXPECT_EQ(seq->num_tokens(), 5);
  EXPECT_EQ(seq->num_output_placeholders, 2);
  EXPECT_EQ(seq->num_computed_tokens, 6);
  EXPECT_EQ(seq->blocks.num_blocks(), 2) << "a KV slot is reserved for the placeholder";

  std::vector<SequenceOutput> out = apply(s, first);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].token, fake_token(1, 0));
  EXPECT_EQ(out[0].num_output_tokens, 1);
  EXPECT_EQ(seq->num_output_placeholders, 1);
  EXPECT_EQ(seq->token_ids.back(), fake_token(1, 0));
  out = apply(s, second);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].token, fake_token(1, 1));
  EXPECT_EQ(out[0].sample_index, 0);
}

TEST(SchedulerAsync, MaxTokensCountsPlaceholders) {
  for (int max_tokens : {1, 2, 3}) {
    SCOPED_TRACE(max_tokens);
    Scheduler s = make_scheduler({});
    s.add(make_request(1, iota_tokens(5), max_tokens));
    const AsyncRun run = run_async(s);
    ASSERT_EQ(run.tokens.at(1).size(), static_cast<size_t>(max_tokens));
    for (int i = 0; i < max_tokens; ++i) EXPECT_EQ(run.tokens.at(1)[i], fake_token(1, i));
    EXPECT_EQ(run.reasons.at(1), FinishReason::kLength);
    EXPECT_EQ(run.num_planned.at(1), max_tokens) << "a step that could only be thrown away was planned";
    EXPECT_EQ(s.block_manager().usage(), 0.0);
  }
}

TEST(SchedulerAsync, MaxModelLenCountsPlaceholders) {
  Scheduler s = make_scheduler({.max_model_len = 8});
  s.add(make_request(1, iota_tokens(5), 100));
  const AsyncRun run = run_async(s);
  EXPECT_EQ(run.tokens.at(1).size(), 3u);
  EXPECT_EQ(run.reasons.at(1), FinishReason::kLength);
  EXPECT_EQ(run.num_planned.at(1), 3);
}

TEST(SchedulerAsync, AStopDropsTheStepPlannedAhead) {
  Scheduler s = make_scheduler({});
  s.add(make_request(1, iota_tokens(5), 10));
  s.add(make_request(2, iota_tokens(6, 100), 4));
  const TokenId eos = fake_token(1, 1);
  const auto stop = [&](const Sequence& seq) { return seq.token_ids.back() == eos; };
  const Launched first = launch(s);
  const Launched second = launch(s);
  EXPECT_EQ(apply(s, first, stop).size(), 2u);
  const Launched third = launch(s);  // plans request 1 again: its stop token is not known yet
  ASSERT_EQ(third.plan.seqs.size(), 2u);
  const std::vector<SequenceOutput> out = apply(s, second, stop);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].seq_id, 1u);
  EXPECT_EQ(out[0].finish_reason, FinishReason::kStop);
  EXPECT_EQ(s.find(1), nullptr) << "finished while its next step is in flight: blocks freed now";
  const std::vector<SequenceOutput> dropped = apply(s, third, stop);
  ASSERT_EQ(dropped.size(), 1u) << "request 1's token from the step planned ahead is dropped";
  EXPECT_EQ(dropped[0].seq_id, 2u);
  EXPECT_EQ(dropped[0].sample_index, 1);
  EXPECT_EQ(dropped[0].token, fake_token(2, 2));
}

TEST(SchedulerAsync, AbortWithTwoStepsInFlight) {
  Scheduler s = make_scheduler({});
  s.add(make_request(1, iota_tokens(5), 10));
  s.add(make_request(2, iota_tokens(5, 100), 3));
  const Launched first = launch(s);
  const Launched second = launch(s);
  EXPECT_TRUE(s.abort(1));
  EXPECT_EQ(s.check_invariants(), "");
  std::vector<SequenceOutput> out = apply(s, first);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seq_id, 2u);
  out = apply(s, second);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].token, fake_token(2, 1));
  const AsyncRun rest = run_async(s);
  EXPECT_EQ(rest.tokens.at(2), std::vector<TokenId>{fake_token(2, 2)});
  EXPECT_EQ(s.block_manager().usage(), 0.0);
}

TEST(SchedulerAsync, PreemptedWithAPlaceholderGetsItsTokenAndRecomputesIt) {
  // 3 blocks of 2 tokens (as TheLastSequenceInPolicyOrderPreemptsItselfAndResumes): request 2 needs a
  // second block while its first token is still a placeholder, and preempts itself.
  Scheduler s = make_scheduler({.num_blocks = 3, .block_size = 2, .max_model_len = 64, .policy = SchedulingPolicy::kPriority});
  s.add(make_request(1, iota_tokens(3), 2, /*priority=*/0));
  s.add(make_request(2, {100, 101}, 3, /*priority=*/1));
  const Launched first = launch(s);
  ASSERT_EQ(first.plan.seqs.size(), 2u);
  const Launched second = launch(s);
  EXPECT_EQ(second.plan.preempted, std::vector<SeqId>{2});
  ASSERT_EQ(second.plan.seqs.size(), 1u);
  const Sequence* two = s.find(2);
  EXPECT_EQ(two->status, SeqStatus::kPreempted);
  EXPECT_EQ(two->num_output_placeholders, 1);

  const std::vector<SequenceOutput> out = apply(s, first);
  ASSERT_EQ(out.size(), 2u) << "the preempted request still gets its token";
  EXPECT_EQ(two->num_output_tokens(), 1);
  EXPECT_EQ(two->num_output_placeholders, 0);

  // Request 1's placeholder is its last token, so it is not planned; its blocks stay until that token
  // arrives, so request 2 does not fit yet.
  const Launched third = launch(s);
  EXPECT_TRUE(third.plan.empty());
  std::map<SeqId, std::vector<TokenId>> tokens;
  for (const SequenceOutput& o : out) tokens[o.seq_id].push_back(o.token);
  for (const SequenceOutput& o : apply(s, second)) tokens[o.seq_id].push_back(o.token);
  EXPECT_EQ(s.find(1), nullptr);

  // Request 2 resumes from its cached first block and recomputes its (now known) output token.
  const Launched fourth = launch(s);
  ASSERT_EQ(fourth.plan.seqs.size(), 1u);
  const ScheduledSequence& e = fourth.plan.seqs[0];
  EXPECT_EQ(e.seq_id, 2u);
  EXPECT_EQ(e.start_position, 2);
  EXPECT_EQ(e.num_placeholder_inputs, 0);
  EXPECT_EQ(e.known_tokens()[0], fake_token(2, 0));
  for (const SequenceOutput& o : apply(s, fourth)) tokens[o.seq_id].push_back(o.token);
  for (const auto& [id, t] : run_async(s).tokens) tokens[id].insert(tokens[id].end(), t.begin(), t.end());
  EXPECT_EQ(tokens[1], (std::vector<TokenId>{fake_token(1, 0), fake_token(1, 1)}));
  EXPECT_EQ(tokens[2], (std::vector<TokenId>{fake_token(2, 0), fake_token(2, 1), fake_token(2, 2)}));
}

TEST(SchedulerAsync, ABlockCompletedByAPlaceholderIsPublishedWhenItsTokenArrives) {
  Scheduler s = make_scheduler({.block_size = 4});
  s.add(make_request(1, iota_tokens(3), 10));
  const Launched first = launch(s);
  const Launched second = launch(s);  // computes position 3: block 0 full, its last token unknown
  const Sequence* seq = s.find(1);
  EXPECT_EQ(seq->blocks.num_hashed_blocks(), 0);
  apply(s, first);
  EXPECT_EQ(seq->blocks.num_hashed_blocks(), 1);

  std::vector<TokenId> prompt = iota_tokens(3);
  prompt.push_back(fake_token(1, 0));
  prompt.push_back(7);
  s.add(make_request(2, prompt, 1));
  const Launched third = launch(s);
  ASSERT_EQ(third.plan.seqs.size(), 2u);
  EXPECT_EQ(third.plan.seqs[1].seq_id, 2u);
  EXPECT_EQ(third.plan.seqs[1].start_position, 4) << "block 0 is a prefix-cache hit";
  apply(s, second);
  apply(s, third);
}

}  // namespace
}  // namespace pagoda
