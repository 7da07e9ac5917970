// The slo scheduling policy (issue 17 item 4): served as priority; the preemption victim is the lowest
// priority, then the most estimated remaining work (max_tokens minus the tokens generated, capped by the
// tenant's observed output lengths), then the latest arrival; a request already past its SLO is preempted
// only when every candidate is. Hand-made candidates for the rule, the output-length estimate on its own,
// and schedulers with an injected clock for the whole path.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <random>
#include <string>
#include <vector>

#include "pagoda/core/error.h"
#include "pagoda/sched/output_lengths.h"
#include "pagoda/sched/policy.h"
#include "pagoda/sched/scheduler.h"
#include "sched_test_util.h"

namespace pagoda {
namespace {

using test::fake_sample;
using test::iota_tokens;
using test::make_request;

constexpr SchedulingPolicy kSlo = SchedulingPolicy::kSlo;

// A running sequence as the scheduler would hold it: `generated` output tokens, the first at first_token_s.
Sequence make_seq(SeqId id, uint64_t arrival, int max_tokens, int generated = 0, int priority = 0,
                  std::string tenant = {}, double submitted_s = 0, double first_token_s = 0) {
  SequenceRequest r = make_request(id, iota_tokens(4, static_cast<TokenId>(100 * id)), max_tokens, priority);
  r.tenant.name = std::move(tenant);
  r.submitted_s = submitted_s;
  Sequence s(std::move(r), arrival);
  for (int i = 0; i < generated; ++i) s.token_ids.push_back(static_cast<TokenId>(7 + i));
  if (generated > 0) s.first_token_s = first_token_s;
  s.status = SeqStatus::kRunning;
  return s;
}

size_t victim(std::vector<Sequence*> candidates, const PreemptionContext& context = {}) {
  return pick_preemption_victim(kSlo, candidates, context);
}

// --- ordering and parsing ---

TEST(SloPolicy, AdmitsAndServesAsPriority) {
  EXPECT_EQ(parse_scheduling_policy("slo"), kSlo);
  EXPECT_STREQ(to_string(kSlo), "slo");
  EXPECT_STREQ(to_string(SchedulingPolicy::kPriority), "priority");
  EXPECT_STREQ(to_string(SchedulingPolicy::kFcfs), "fcfs");
  std::vector<Sequence> seqs;
  for (uint64_t i = 0; i < 6; ++i) seqs.push_back(make_seq(i + 1, i, 4, 0, static_cast<int>((i * 5) % 3) - 1));
  for (const Sequence& a : seqs) {
    for (const Sequence& b : seqs) {
      EXPECT_EQ(schedules_before(kSlo, a, b), schedules_before(SchedulingPolicy::kPriority, a, b))
          << a.seq_id << " vs " << b.seq_id;
    }
  }
}

// --- the victim rule on hand-made candidates ---

TEST(SloPolicy, VictimIsTheLowestPriorityFirst) {
  // b has the least work left and arrived first, but the largest priority value (served last).
  Sequence a = make_seq(1, 1, 100), b = make_seq(2, 0, 2, 0, /*priority=*/3), c = make_seq(3, 2, 50, 0, 1);
  EXPECT_EQ(victim({&a, &b, &c}), 1u);
  EXPECT_EQ(victim({&a, &c}), 1u);  // c: priority 1 beats a's 0 although a has more work left
}

TEST(SloPolicy, WithinAPriorityTheMostRemainingWork) {
  // a: 100 left; b: 30 left; c, the latest arrival: 200 - 190 = 10 left.
  Sequence a = make_seq(1, 0, 100), b = make_seq(2, 1, 30), c = make_seq(3, 2, 200, 190);
  std::vector<Sequence*> candidates = {&a, &b, &c};
  EXPECT_EQ(victim(candidates), 0u);
  EXPECT_EQ(pick_preemption_victim(SchedulingPolicy::kPriority, candidates), 2u);  // unchanged: the latest
  EXPECT_EQ(pick_preemption_victim(SchedulingPolicy::kFcfs, candidates), 2u);
  EXPECT_EQ(estimated_remaining_steps(c, nullptr, INT_MAX), 10);
  // max_model_len caps the steps too: a has room for 12 more tokens (4 prompt + 12 = 16).
  EXPECT_EQ(estimated_remaining_steps(a, nullptr, 16), 12);
}

TEST(SloPolicy, TenantHistoryCapsTheRemainingWork) {
  OutputLengthStats lengths;
  for (int i = 0; i < 10; ++i) lengths.record("chat", 200);
  for (int i = 0; i < 10; ++i) lengths.record("batch", 1000);
  // a asks for 4096 tokens but its tenant's outputs are 200 long; b asks for 600 of a tenant that uses them.
  Sequence a = make_seq(1, 0, 4096, 0, 0, "chat"), b = make_seq(2, 1, 600, 0, 0, "batch");
  Sequence late = make_seq(3, 2, 4096, 50, 0, "chat");
  EXPECT_EQ(estimated_remaining_steps(a, &lengths, INT_MAX), 200);
  EXPECT_EQ(estimated_remaining_steps(b, &lengths, INT_MAX), 600);
  EXPECT_EQ(estimated_remaining_steps(late, &lengths, INT_MAX), 150);
  const PreemptionContext context{.output_lengths = &lengths};
  EXPECT_EQ(victim({&a, &b, &late}, context), 1u);
  // From max_tokens alone a would be the victim (4096 left).
  EXPECT_EQ(victim({&a, &b, &late}), 0u);
}

TEST(SloPolicy, TiesGoToTheLatestArrival) {
  Sequence a = make_seq(1, 0, 20, 5), b = make_seq(2, 2, 15), c = make_seq(3, 1, 30, 15);  // 15 left each
  EXPECT_EQ(victim({&a, &b, &c}), 1u);
  EXPECT_EQ(victim({&a, &c}), 1u);
}

// --- SLO protection ---

TEST(SloPolicy, PastSloByTtftOrTpot) {
  const SloTargets slo{.ttft_seconds = 0.5, .tpot_seconds = 0.1};
  // No token yet, submitted at t = 10.
  const Sequence waiting = make_seq(1, 0, 10, 0, 0, {}, /*submitted_s=*/10);
  EXPECT_FALSE(past_slo(waiting, slo, 10.4));
  EXPECT_TRUE(past_slo(waiting, slo, 10.6));
  EXPECT_FALSE(past_slo(waiting, SloTargets{.tpot_seconds = 0.1}, 100));  // no TTFT target
  // 4 tokens out, the first at t = 11: the TPOT if its next token came now is (now - 11) / 4.
  const Sequence decoding = make_seq(2, 1, 10, 4, 0, {}, 10, /*first_token_s=*/11);
  EXPECT_FALSE(past_slo(decoding, slo, 11.39));  // 0.0975 s per token
  EXPECT_TRUE(past_slo(decoding, slo, 11.41));   // 0.1025
  EXPECT_FALSE(past_slo(decoding, SloTargets{.ttft_seconds = 0.5}, 100));  // it has its first token
  EXPECT_FALSE(past_slo(decoding, SloTargets{}, 100));
}

TEST(SloPolicy, AProtectedRequestIsSparedWhileAnUnprotectedOneExists) {
  const SloTargets slo{.ttft_seconds = 1.0, .tpot_seconds = 0.1};
  const double now = 20;
  // a: the most work left but no token 5 s after submission. b: a low priority but 0.2 s per token.
  // c and d: on time.
  Sequence a = make_seq(1, 0, 500, 0, 0, {}, /*submitted_s=*/15);
  Sequence b = make_seq(2, 1, 300, 10, /*priority=*/9, {}, 10, /*first_token_s=*/18);
  Sequence c = make_seq(3, 2, 40, 10, 0, {}, 19, 19.5);
  Sequence d = make_seq(4, 3, 20, 0, 0, {}, 19.5);
  ASSERT_TRUE(past_slo(a, slo, now));
  ASSERT_TRUE(past_slo(b, slo, now));
  ASSERT_FALSE(past_slo(c, slo, now));
  ASSERT_FALSE(past_slo(d, slo, now));
  const PreemptionContext context{.slo = slo, .now = now};
  EXPECT_EQ(victim({&a, &b, &c, &d}, context), 2u);  // c: 30 left, more than d's 20
  EXPECT_EQ(victim({&a, &b, &d}, context), 2u);      // d: the only one not protected
  // Without targets the usual rule: b, the lowest priority.
  EXPECT_EQ(victim({&a, &b, &c, &d}, PreemptionContext{.now = now}), 1u);
}

TEST(SloPolicy, WhenAllAreProtectedTheUsualRule) {
  const SloTargets slo{.ttft_seconds = 1.0, .tpot_seconds = 0.1};
  const double now = 20;
  Sequence a = make_seq(1, 0, 500, 0, 0, {}, 15);      // 500 left
  Sequence b = make_seq(2, 1, 300, 10, 0, {}, 10, 18);  // 290 left
  Sequence c = make_seq(3, 2, 300, 10, 0, {}, 10, 18);  // 290 left, later
  const PreemptionContext context{.slo = slo, .now = now};
  EXPECT_EQ(victim({&a, &b, &c}, context), 0u);
  EXPECT_EQ(victim({&b, &c}, context), 1u);
  Sequence low = make_seq(4, 3, 10, 5, /*priority=*/2, {}, 10, 18);
  EXPECT_EQ(victim({&a, &b, &c, &low}, context), 3u);
}

// --- the output-length estimate ---

TEST(OutputLengthStats, LearnsTheTenantsMean) {
  OutputLengthStats lengths;
  EXPECT_FALSE(lengths.expected("chat"));
  const int chat[] = {100, 300, 200, 120, 80};
  double sum = 0;
  for (int i = 0; i < 5; ++i) {
    lengths.record("chat", chat[i]);
    sum += chat[i];
    EXPECT_DOUBLE_EQ(*lengths.expected("chat"), sum / (i + 1)) << "the running mean of the first lengths";
  }
  for (int i = 5; i < OutputLengthStats::kWindow; ++i) lengths.record("chat", 200);
  sum += 200.0 * (OutputLengthStats::kWindow - 5);
  EXPECT_NEAR(*lengths.expected("chat"), sum / OutputLengthStats::kWindow, 1e-9);
  EXPECT_EQ(lengths.num_recorded("chat"), OutputLengthStats::kWindow);
  // Then an EWMA: the tenant's outputs grow to 1000 and the estimate follows, each step 1/16 of the gap.
  double expected = *lengths.expected("chat");
  for (int i = 0; i < 200; ++i) {
    lengths.record("chat", 1000);
    expected += (1000 - expected) / OutputLengthStats::kWindow;
  }
  EXPECT_NEAR(*lengths.expected("chat"), expected, 1e-6);
  EXPECT_NEAR(*lengths.expected("chat"), 1000, 0.5);
}

TEST(OutputLengthStats, UntouchedTenantsUseTheEngineEstimate) {
  OutputLengthStats lengths;
  lengths.record("chat", 100);
  lengths.record("chat", 200);
  lengths.record("", 600);  // a request without tenant: the engine's estimate only
  EXPECT_DOUBLE_EQ(*lengths.expected("chat"), 150);
  EXPECT_DOUBLE_EQ(*lengths.engine_mean(), 300);
  EXPECT_DOUBLE_EQ(*lengths.expected("batch"), 300);  // no request of its own finished yet
  EXPECT_DOUBLE_EQ(*lengths.expected(""), 300);
  EXPECT_EQ(lengths.num_recorded("batch"), 0);
  EXPECT_EQ(lengths.num_recorded(""), 3);
  const Sequence batch = make_seq(1, 0, 4096, 0, 0, "batch"), none = make_seq(2, 1, 4096, 100);
  EXPECT_EQ(estimated_remaining_steps(batch, &lengths, INT_MAX), 300);
  EXPECT_EQ(estimated_remaining_steps(none, &lengths, INT_MAX), 200);
}

TEST(OutputLengthStats, StartsFromMaxTokensAndNeverBelowOneStep) {
  const OutputLengthStats empty;
  const Sequence fresh = make_seq(1, 0, 4096, 0, 0, "chat"), going = make_seq(2, 1, 4096, 96, 0, "chat");
  EXPECT_EQ(estimated_remaining_steps(fresh, &empty, INT_MAX), 4096);
  EXPECT_EQ(estimated_remaining_steps(going, &empty, INT_MAX), 4000);
  OutputLengthStats lengths;
  lengths.record("chat", 50);
  // Past its tenant's mean: expected to end soon, but it is unfinished, so one step at least.
  EXPECT_EQ(estimated_remaining_steps(going, &lengths, INT_MAX), 1);
  // max_tokens still caps a request asking for less than its tenant's mean.
  const Sequence small = make_seq(3, 2, 20, 5, 0, "chat");
  EXPECT_EQ(estimated_remaining_steps(small, &lengths, INT_MAX), 15);
}

// --- through the scheduler ---

struct SloScheduler {
  double now = 0;
  Scheduler s;
  SloScheduler(SchedulingPolicy policy, SloTargets slo, int num_blocks, int max_num_batched_tokens = 32)
      : s(SchedulerConfig{.max_num_seqs = 4, .max_num_batched_tokens = max_num_batched_tokens, .max_model_len = 64,
                          .policy = policy, .slo = slo},
          BlockManagerOptions{.num_blocks = num_blocks, .block_size = 4, .enable_prefix_caching = false},
          [this] { return now; }) {}
  SloScheduler(const SloScheduler&) = delete;

  StepPlan step(const Scheduler::StopCheck& stop = {}) {
    StepPlan plan = s.schedule();
    test::expect_plan_valid(s, plan);
    s.update(plan, fake_sample(plan), stop);
    EXPECT_EQ(s.check_invariants(), "");
    return plan;
  }
  void run_to_end(const Scheduler::StopCheck& stop = {}) {
    for (int i = 0; i < 100 && s.has_unfinished(); ++i) step(stop);
    ASSERT_FALSE(s.has_unfinished());
  }
};

SequenceRequest tenant_request(SeqId id, std::string tenant, int prompt_len, int max_tokens) {
  SequenceRequest r = make_request(id, iota_tokens(prompt_len, static_cast<TokenId>(100 * id)), max_tokens);
  r.tenant.name = std::move(tenant);
  return r;
}

std::vector<SeqId> planned(const StepPlan& plan) {
  std::vector<SeqId> ids;
  for (const ScheduledSequence& e : plan.seqs) ids.push_back(e.seq_id);
  return ids;
}

TEST(SchedulerSlo, RecordsOutputLengthsOfFinishedRequestsButNotOfAborted) {
  SloScheduler t(kSlo, {}, 16);
  const auto chat_stops_after_two = [](const Sequence& seq) {
    return seq.tenant.name == "chat" && seq.num_output_tokens() >= 2;
  };
  t.s.add(tenant_request(1, "chat", 4, 20));   // stops at 2
  t.s.add(tenant_request(2, "chat", 4, 20));   // stops at 2
  t.s.add(tenant_request(3, "batch", 4, 6));   // length: 6
  t.s.add(tenant_request(4, "batch", 4, 20));  // aborted after 1
  t.step(chat_stops_after_two);
  EXPECT_TRUE(t.s.abort(4));
  t.run_to_end(chat_stops_after_two);
  const OutputLengthStats& lengths = t.s.output_lengths();
  EXPECT_EQ(lengths.num_recorded("chat"), 2);
  EXPECT_EQ(lengths.num_recorded("batch"), 1);
  EXPECT_EQ(lengths.num_recorded(""), 3);
  EXPECT_DOUBLE_EQ(*lengths.expected("chat"), 2);
  EXPECT_DOUBLE_EQ(*lengths.expected("batch"), 6);
  EXPECT_DOUBLE_EQ(*lengths.engine_mean(), 10.0 / 3);
}

TEST(SchedulerSlo, TheFirstTokenTimeAndSubmissionTimeComeFromTheClock) {
  SloScheduler t(kSlo, {}, 16);
  t.now = 3;
  t.s.add(tenant_request(1, "", 8, 4));
  SequenceRequest given = tenant_request(2, "", 8, 4);
  given.submitted_s = 1.5;  // the engine's submission time
  t.s.add(std::move(given));
  EXPECT_EQ(t.s.find(1)->submitted_s, 3);
  EXPECT_EQ(t.s.find(2)->submitted_s, 1.5);
  EXPECT_FALSE(t.s.find(1)->first_token_s);
  t.now = 4;
  t.step();
  t.now = 5;
  t.step();
  EXPECT_EQ(t.s.find(1)->first_token_s, 4.0);
  EXPECT_EQ(t.s.find(2)->first_token_s, 4.0);
}

// 4 blocks of 4 tokens. After a warm-up, "chat" outputs are 1 token long and "batch" outputs 6. Then A (no
// tenant), B (batch) and C (chat) each hold a block after their prompt; at the next step A takes the last
// free block, and B needs one: the candidates are B and C (A is planned).
StepPlan preemption_step_after_history(SchedulingPolicy policy) {
  SloScheduler t(policy, {}, 4);
  const auto chat_stops = [](const Sequence& seq) { return seq.tenant.name == "chat"; };
  SeqId id = 10;
  for (int i = 0; i < 3; ++i) {  // one at a time: no preemption
    t.s.add(tenant_request(id++, "chat", 4, 7));
    t.run_to_end(chat_stops);
    t.s.add(tenant_request(id++, "batch", 4, 6));
    t.run_to_end(chat_stops);
  }
  EXPECT_EQ(t.s.num_preemptions(), 0u);
  EXPECT_DOUBLE_EQ(*t.s.output_lengths().expected("chat"), 1);
  EXPECT_DOUBLE_EQ(*t.s.output_lengths().expected("batch"), 6);
  t.s.add(tenant_request(1, "", 4, 2));
  t.s.add(tenant_request(2, "batch", 4, 7));
  t.s.add(tenant_request(3, "chat", 4, 7));
  const StepPlan first = t.step();
  EXPECT_EQ(planned(first), (std::vector<SeqId>{1, 2, 3}));
  EXPECT_TRUE(first.preempted.empty());
  return t.step();
}

TEST(SchedulerSlo, PreemptsTheMostRemainingWorkByTenantHistory) {
  // B has min(7 - 1, 6 - 1) = 5 steps left, C max(1, 1 - 1) = 1: B preempts itself and C goes on.
  const StepPlan slo = preemption_step_after_history(kSlo);
  EXPECT_EQ(slo.preempted, std::vector<SeqId>{2});
  EXPECT_EQ(planned(slo), (std::vector<SeqId>{1, 3}));
  // Priority preempts the latest arrival, C, whatever its tenant's history.
  const StepPlan priority = preemption_step_after_history(SchedulingPolicy::kPriority);
  EXPECT_EQ(priority.preempted, std::vector<SeqId>{3});
  EXPECT_EQ(planned(priority), (std::vector<SeqId>{1, 2}));
}

// 5 blocks of 4 tokens, 18 tokens a step. A (id 1: 4 + max 2) and C (id 2: 4 + max 3) take a block each and
// sample their first token at t = 0; B (id 3: 12-token prompt, max 4) gets 10 prompt tokens (3 blocks, room for
// the other 2): the pool is full. Next step A needs a block, and the candidates are A (1 step left), C (2) and
// B (4, and no token yet). B was submitted at t = -1.
StepPlan protection_step(SloTargets slo, double second_step_at) {
  SloScheduler t(kSlo, slo, 5, 18);
  t.s.add(tenant_request(1, "", 4, 2));
  t.s.add(tenant_request(2, "", 4, 3));
  SequenceRequest b = tenant_request(3, "", 12, 4);
  b.submitted_s = -1;
  t.s.add(std::move(b));
  const StepPlan first = t.step();
  // All three admitted (with a TTFT target B is late already, so A and C go newest first: 2, 1, 3).
  std::vector<SeqId> admitted = planned(first);
  std::sort(admitted.begin(), admitted.end());
  EXPECT_EQ(admitted, (std::vector<SeqId>{1, 2, 3}));
  EXPECT_EQ(first.seqs.back().seq_id, 3);
  EXPECT_EQ(t.s.block_manager().num_free_blocks(), 0);
  t.now = second_step_at;
  return t.step();
}

TEST(SchedulerSlo, SparesARequestPastItsSloWhileAnotherCandidateIsNot) {
  // No targets: B, the most work left.
  StepPlan plan = protection_step({}, 0.1);
  EXPECT_EQ(plan.preempted, std::vector<SeqId>{3});
  // B is 1.1 s past its submission without a token (TTFT target 0.5 s): C goes instead, and B keeps its blocks
  // and finishes its prompt.
  plan = protection_step({.ttft_seconds = 0.5}, 0.1);
  EXPECT_EQ(plan.preempted, std::vector<SeqId>{2});
  EXPECT_EQ(planned(plan), (std::vector<SeqId>{1, 3}));
  // A and C have their first tokens from t = 0; at t = 10 they are at 10 s per token, past a TPOT of 1 s, and B
  // past its TTFT: all protected, so the usual rule preempts B.
  plan = protection_step({.ttft_seconds = 0.5, .tpot_seconds = 1}, 10);
  EXPECT_EQ(plan.preempted, std::vector<SeqId>{3});
  // Only A and C protected (no TTFT target): B again.
  plan = protection_step({.tpot_seconds = 1}, 10);
  EXPECT_EQ(plan.preempted, std::vector<SeqId>{3});
}

// Within a priority, waiting requests that can still make their targets are admitted before those already past
// them: the late ones oldest first, those in time newest first while any is late; priority still comes first.
// Other policies, or slo without targets, keep arrival order.
TEST(SchedulerSlo, AdmitsRequestsThatCanStillMakeTheirTargetsFirst) {
  const auto pending_ids = [](const Scheduler& s) { return s.waiting_order(); };
  for (SchedulingPolicy policy : {kSlo, SchedulingPolicy::kPriority}) {
    SloScheduler t(policy, {.ttft_seconds = 1.0}, 64, 8);  // 8 tokens a step: one prompt of 8
    t.s.add(make_request(1, iota_tokens(8, 100), 2, 0));
    t.s.add(make_request(2, iota_tokens(8, 200), 2, 0));
    t.now = 1.5;  // 1 and 2 have waited past the TTFT target
    t.s.add(make_request(3, iota_tokens(8, 300), 2, 0));
    t.s.add(make_request(4, iota_tokens(8, 400), 2, 1));  // in time, but a lower priority
    t.s.add(make_request(5, iota_tokens(8, 500), 2, 0));
    if (policy == kSlo) {
      EXPECT_EQ(pending_ids(t.s), (std::vector<SeqId>{5, 3, 1, 2, 4}));
      EXPECT_EQ(planned(t.step()), std::vector<SeqId>{5});
    } else {
      EXPECT_EQ(pending_ids(t.s), (std::vector<SeqId>{1, 2, 3, 5, 4}));
      EXPECT_EQ(planned(t.step()), std::vector<SeqId>{1});
    }
    t.run_to_end();
  }
  // With a first-token estimate, a request that has waited less than the target but cannot make it any more
  // (wait + estimate > target) counts as late.
  SloScheduler est(kSlo, {.ttft_seconds = 1.0}, 64, 8);
  est.s.add(make_request(1, iota_tokens(8, 100), 2, 0));
  est.now = 0.5;
  est.s.add(make_request(2, iota_tokens(8, 200), 2, 0));
  est.s.set_first_token_estimate(0.4);
  EXPECT_EQ(pending_ids(est.s), (std::vector<SeqId>{1, 2}));  // 0.5 + 0.4 <= 1: both can make it
  est.s.set_first_token_estimate(0.6);
  EXPECT_EQ(pending_ids(est.s), (std::vector<SeqId>{2, 1}));  // 0.5 + 0.6 > 1: 1 cannot
  EXPECT_EQ(planned(est.step()), std::vector<SeqId>{2});

  SloScheduler untargeted(kSlo, {}, 64, 8);
  untargeted.s.add(make_request(1, iota_tokens(8, 100), 2, 0));
  untargeted.now = 100;
  untargeted.s.add(make_request(2, iota_tokens(8, 200), 2, 0));
  EXPECT_EQ(planned(untargeted.step()), std::vector<SeqId>{1});
}

// Without preemption, and with no request past its targets, the slo policy plans exactly as priority: same
// trace, same plans.
TEST(SchedulerSlo, PlansAsPriorityWhenNothingIsPreempted) {
  SloScheduler slo(kSlo, {.ttft_seconds = 1000, .tpot_seconds = 1000}, 64, 16);
  SloScheduler priority(SchedulingPolicy::kPriority, {}, 64, 16);
  std::mt19937 rng(7);
  SeqId id = 1;
  for (int step = 0; step < 200 && (id < 40 || slo.s.has_unfinished()); ++step) {
    if (id < 40 && rng() % 2 == 0) {
      const int prompt = 1 + static_cast<int>(rng() % 12), max_tokens = 1 + static_cast<int>(rng() % 10);
      const int prio = static_cast<int>(rng() % 3);
      for (SloScheduler* t : {&slo, &priority})
        t->s.add(make_request(id, iota_tokens(prompt, static_cast<TokenId>(id * 50)), max_tokens, prio));
      ++id;
    }
    slo.now = priority.now = step * 0.1;
    const StepPlan a = slo.step(), b = priority.step();
    ASSERT_TRUE(a.preempted.empty());
    ASSERT_EQ(a.seqs.size(), b.seqs.size()) << "step " << step;
    for (size_t i = 0; i < a.seqs.size(); ++i) {
      EXPECT_EQ(a.seqs[i].seq_id, b.seqs[i].seq_id);
      EXPECT_EQ(a.seqs[i].start_position, b.seqs[i].start_position);
      EXPECT_EQ(a.seqs[i].num_tokens, b.seqs[i].num_tokens);
    }
  }
  EXPECT_FALSE(slo.s.has_unfinished());
  EXPECT_FALSE(priority.s.has_unfinished());
}

}  // namespace
}  // namespace pagoda
