// The TTL batching window (SchedulerConfig::batch_wait_seconds, Scheduler::hold_new_requests): new requests
// wait for company while a step would compute no prompt tokens, up to the window from the oldest's submission,
// less under a TTFT target; they go at once when they fill the step, and never hold up a step that prefills
// anyway, a decode, or a preempted request.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "pagoda/core/error.h"
#include "pagoda/sched/scheduler.h"
#include "sched_test_util.h"

namespace pagoda {
namespace {

using test::iota_tokens;
using test::make_request;

struct Window {
  double now = 0;
  Scheduler s;
  explicit Window(double wait_s, double ttft_s = 0, int max_num_seqs = 8, int budget = 32, int num_blocks = 64)
      : s(SchedulerConfig{.max_num_seqs = max_num_seqs, .max_num_batched_tokens = budget, .max_model_len = 128,
                          .batch_wait_seconds = wait_s, .batch_wait_ttft_seconds = ttft_s},
          BlockManagerOptions{num_blocks, 4, true}, [this] { return now; }) {}
  void add(SeqId id, int prompt_tokens, double submitted, int max_tokens = 4) {
    SequenceRequest r = make_request(id, iota_tokens(prompt_tokens, static_cast<TokenId>(100 * id)), max_tokens);
    r.submitted_s = submitted;
    s.add(std::move(r));
  }
  std::vector<SeqId> ids(const StepPlan& plan) const {
    std::vector<SeqId> out;
    for (const ScheduledSequence& e : plan.seqs) out.push_back(e.seq_id);
    return out;
  }
  // Applies a plan with one token for each sampling entry.
  void apply(const StepPlan& plan) {
    std::vector<TokenId> sampled(static_cast<size_t>(plan.num_sampling()), 7);
    (void)s.update(plan, sampled);
  }
};

TEST(BatchWindow, AnIdleEngineHoldsNewRequestsUntilTheWindowEndsThenPrefillsThemTogether) {
  Window w(/*wait_s=*/0.050);
  w.add(1, 5, /*submitted=*/0.0);
  w.now = 0.010;
  StepPlan plan = w.s.schedule();
  EXPECT_TRUE(plan.empty());
  ASSERT_TRUE(w.s.held_until().has_value());
  EXPECT_DOUBLE_EQ(*w.s.held_until(), 0.050);
  w.add(2, 6, /*submitted=*/0.020);
  w.now = 0.049;
  EXPECT_TRUE(w.s.schedule().empty()) << "the window counts from the oldest request";
  EXPECT_DOUBLE_EQ(*w.s.held_until(), 0.050);
  w.now = 0.050;
  plan = w.s.schedule();
  EXPECT_EQ(w.ids(plan), (std::vector<SeqId>{1, 2}));
  EXPECT_FALSE(w.s.held_until().has_value());
  EXPECT_EQ(w.s.num_held_steps(), 2u);
  EXPECT_EQ(w.s.check_invariants(), "");
}

TEST(BatchWindow, RequestsThatFillTheStepGoAtOnce) {
  Window w(0.050, 0, /*max_num_seqs=*/8, /*budget=*/32);
  w.add(1, 20, 0.0);
  w.now = 0.001;
  EXPECT_TRUE(w.s.schedule().empty());
  w.add(2, 20, 0.001);  // 40 prompt tokens >= the budget of 32
  const StepPlan plan = w.s.schedule();
  EXPECT_EQ(w.ids(plan), (std::vector<SeqId>{1, 2}));
  EXPECT_EQ(plan.num_scheduled_tokens, 32);

  Window slots(0.050, 0, /*max_num_seqs=*/2);
  slots.add(1, 3, 0.0);
  slots.add(2, 3, 0.0);  // as many requests as free sequence slots
  slots.now = 0.001;
  EXPECT_EQ(slots.ids(slots.s.schedule()), (std::vector<SeqId>{1, 2}));
}

TEST(BatchWindow, DecodesRunWhileNewRequestsAreHeldAndAStepThatPrefillsTakesThemAtOnce) {
  Window w(0.050);
  w.add(1, 4, 0.0);
  w.now = 0.100;  // past its window: admitted, prefilled, then decoding
  StepPlan plan = w.s.schedule();
  ASSERT_EQ(w.ids(plan), (std::vector<SeqId>{1}));
  w.apply(plan);
  w.add(2, 5, 0.100);
  w.now = 0.101;
  plan = w.s.schedule();
  EXPECT_EQ(w.ids(plan), (std::vector<SeqId>{1})) << "the decode runs, the new request waits";
  EXPECT_TRUE(w.s.held_until().has_value());
  w.apply(plan);

  // A step that computes prompt tokens anyway (a long prompt in chunks) takes new requests with it.
  Window chunks(0.050, 0, 8, /*budget=*/16);
  chunks.add(1, 40, 0.0);
  chunks.now = 0.100;
  plan = chunks.s.schedule();  // the first 16 of 40
  ASSERT_EQ(chunks.ids(plan), (std::vector<SeqId>{1}));
  chunks.apply(plan);
  chunks.add(2, 3, 0.100);
  chunks.now = 0.101;
  plan = chunks.s.schedule();  // 16 more of the prompt, and the new request's 3 would not fit: then the next
  EXPECT_FALSE(chunks.s.held_until().has_value());
  chunks.apply(plan);
  plan = chunks.s.schedule();  // the prompt's last 8 and the new request's 3
  EXPECT_EQ(chunks.ids(plan), (std::vector<SeqId>{1, 2}));
}

TEST(BatchWindow, ATtftTargetShortensTheWindowByThePredictedTimeToAFirstToken) {
  Window w(/*wait_s=*/0.100, /*ttft_s=*/0.050);
  w.s.set_first_token_estimate(0.030);
  w.add(1, 5, 1.0);
  w.now = 1.001;
  EXPECT_TRUE(w.s.schedule().empty());
  EXPECT_NEAR(*w.s.held_until(), 1.020, 1e-12);
  w.now = 1.020;
  EXPECT_EQ(w.ids(w.s.schedule()), (std::vector<SeqId>{1}));

  Window late(0.100, 0.050);
  late.s.set_first_token_estimate(0.060);  // the target cannot be made: no wait at all
  late.add(1, 5, 1.0);
  late.now = 1.0;
  EXPECT_EQ(late.ids(late.s.schedule()), (std::vector<SeqId>{1}));
}

TEST(BatchWindow, APreemptedRequestIsNeverHeld) {
  // Two sequences of up to 17 tokens in a pool of 6 blocks of 4: their growth preempts one of them. Their
  // prompts fill the step's budget of 14, so they start at once, and the clock stays within their window.
  Window w(0.050, 0, 8, /*budget=*/14, /*num_blocks=*/6);
  w.add(1, 7, 0.99, /*max_tokens=*/10);
  w.add(2, 7, 0.99, /*max_tokens=*/10);
  w.now = 1.0;
  bool preempted = false;
  for (int step = 0; step < 12 && !preempted; ++step) {
    const StepPlan plan = w.s.schedule();
    preempted = !plan.preempted.empty();
    w.apply(plan);
  }
  ASSERT_TRUE(preempted);
  ASSERT_EQ(w.s.num_waiting(), 1);
  // Once the other finishes or makes room, the preempted one is admitted without waiting for the window.
  for (int step = 0; step < 40 && w.s.num_waiting() > 0; ++step) {
    const StepPlan plan = w.s.schedule();
    EXPECT_FALSE(w.s.held_until().has_value()) << "step " << step;
    w.apply(plan);
  }
  EXPECT_EQ(w.s.num_waiting(), 0);
}

TEST(BatchWindow, OffByDefault) {
  Window w(0.0);
  w.add(1, 5, 0.0);
  EXPECT_EQ(w.ids(w.s.schedule()), (std::vector<SeqId>{1}));
  EXPECT_EQ(w.s.num_held_steps(), 0u);
  EXPECT_THROW(Window w2(-1.0), Error);
}

}  // namespace
}  // namespace pagoda
