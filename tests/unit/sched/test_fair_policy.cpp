// The fair scheduling policy: FairShare's weighted service counters and their raise for idle tenants, and the
// scheduler sharing prompt work among tenants by weight (a light tenant's prompt is not stuck behind a flood's
// chunks; backlogged tenants get computed tokens in proportion to their weights), each against fcfs on the
// same trace so that the test tells the policies apart.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "pagoda/sched/fair_share.h"
#include "pagoda/sched/scheduler.h"
#include "sched_test_util.h"

namespace pagoda {
namespace {

constexpr SchedulingPolicy kFair = SchedulingPolicy::kFair;

Sequence make_seq(uint64_t arrival, const std::string& tenant, float weight, int priority = 0) {
  SequenceRequest r = test::make_request(arrival, test::iota_tokens(4), 4, priority);
  r.tenant.name = tenant;
  r.tenant.weight = weight;
  return Sequence(std::move(r), arrival);
}

SequenceRequest tenant_request(SeqId id, const std::string& tenant, float weight, int prompt_len, int max_tokens,
                               int priority = 0) {
  // Distinct tokens per request: no prefix hits between them.
  SequenceRequest r = test::make_request(id, test::iota_tokens(prompt_len, static_cast<TokenId>(id * 1000)), max_tokens,
                                         priority);
  r.tenant.name = tenant;
  r.tenant.weight = weight;
  return r;
}

// Plans and applies one step (synchronously); returns the plan's tokens per sequence.
std::map<SeqId, int> step(Scheduler& s) {
  const StepPlan plan = s.schedule();
  test::expect_plan_valid(s, plan);
  std::map<SeqId, int> tokens;
  for (const ScheduledSequence& e : plan.seqs) tokens[e.seq_id] = e.num_tokens;
  s.update(plan, test::fake_sample(plan));
  EXPECT_EQ(s.check_invariants(), "");
  return tokens;
}

TEST(FairShare, ChargesComputedTokensDividedByTheTenantsWeight) {
  FairShare f(kFair);
  const Sequence a = make_seq(0, "a", 0.5f), b = make_seq(1, "b", 2.0f), none = make_seq(2, "", 1.0f);
  f.added(a);
  f.added(b);
  f.added(none);
  f.charge(a, 10);
  f.charge(b, 10);
  f.charge(none, 3);
  EXPECT_DOUBLE_EQ(f.service("a"), 20.0);
  EXPECT_DOUBLE_EQ(f.service("b"), 5.0);
  EXPECT_DOUBLE_EQ(f.service(""), 3.0);
  EXPECT_DOUBLE_EQ(f.service("never seen"), 0.0);
}

TEST(FairShare, AnIdleTenantIsRaisedToTheLeastServiceOfTheActiveOnes) {
  FairShare f(kFair);
  const Sequence a = make_seq(0, "a", 1.0f), b = make_seq(1, "b", 1.0f), c = make_seq(2, "c", 1.0f);
  f.added(a);
  f.added(b);
  f.charge(a, 100);
  f.charge(b, 40);
  f.added(c);  // idle until now: no credit for the time it asked for nothing
  EXPECT_DOUBLE_EQ(f.service("c"), 40.0);
  // A second sequence of an active tenant changes nothing.
  const Sequence c2 = make_seq(3, "c", 1.0f);
  f.added(c2);
  EXPECT_DOUBLE_EQ(f.service("c"), 40.0);
  // A tenant ahead of the active ones keeps its own service.
  f.finished(a);
  f.charge(b, 200);  // b at 240
  f.charge(c, 100);  // c at 140
  f.added(a);
  EXPECT_DOUBLE_EQ(f.service("a"), 140.0);  // raised from 100 to min(240, 140)
  f.finished(b);
  f.charge(c, 500);  // c at 640
  f.added(b);
  EXPECT_DOUBLE_EQ(f.service("b"), 240.0);  // already above min(a 140, c 640)
  // Everyone idle: a newcomer starts where the last active tenant left off.
  for (const Sequence* s : {&a, &b, &c, &c2}) f.finished(*s);
  const Sequence d = make_seq(4, "d", 1.0f);
  f.added(d);
  EXPECT_DOUBLE_EQ(f.service("d"), 640.0);
}

TEST(FairShare, PreemptsFromTheTenantWithTheMostServiceWithinTheLowestPriority) {
  FairShare f(kFair);
  Sequence heavy = make_seq(0, "heavy", 1.0f), light = make_seq(1, "light", 1.0f), light2 = make_seq(2, "light", 1.0f);
  Sequence low = make_seq(3, "light", 1.0f, /*priority=*/1);
  for (const Sequence* s : {&heavy, &light, &light2, &low}) f.added(*s);
  f.charge(heavy, 50);
  f.charge(light, 10);
  std::vector<Sequence*> candidates{&heavy, &light, &light2};
  const PreemptionContext context{.fair_share = &f};
  EXPECT_EQ(pick_preemption_victim(kFair, candidates, context), 0u) << "the heavy tenant's, though it came first";
  EXPECT_EQ(pick_preemption_victim(SchedulingPolicy::kFcfs, candidates), 2u) << "fcfs: the latest";
  candidates.push_back(&low);
  EXPECT_EQ(pick_preemption_victim(kFair, candidates, context), 3u) << "the lowest priority first";
}

// A flooding tenant's long prompt is mid-prefill when a light tenant's short prompt arrives: under fair the light
// prompt is computed in the very next step, beside the flood's chunk; under fcfs it waits for the flood's chunks.
TEST(FairPolicy, ALightTenantsPromptIsNotQueuedBehindAFloodsChunks) {
  for (const SchedulingPolicy policy : {kFair, SchedulingPolicy::kFcfs}) {
    SCOPED_TRACE(to_string(policy));
    Scheduler s = test::make_scheduler({.num_blocks = 256, .block_size = 4, .max_num_seqs = 8,
                                        .max_num_batched_tokens = 32, .max_model_len = 256, .policy = policy});
    for (SeqId id = 1; id <= 3; ++id) s.add(tenant_request(id, "noisy", 0.3f, 100, 4));
    EXPECT_EQ(step(s), (std::map<SeqId, int>{{1, 32}}));
    s.add(tenant_request(10, "light", 0.8f, 8, 4));
    const std::map<SeqId, int> second = step(s);
    if (policy == kFair) {
      EXPECT_EQ(second, (std::map<SeqId, int>{{1, 24}, {10, 8}})) << "the light prompt whole, the flood the rest";
    } else {
      EXPECT_EQ(second, (std::map<SeqId, int>{{1, 32}}));
    }
  }
}

// --long-prefill-token-threshold 8 with --max-long-partial-prefills 1: a flood of long prompts takes one chunk of 8 a
// step, not the whole budget, so the step a light tenant's prompt arrives during is short; the light prompt and the
// light tenant's next short one both go ahead of the flood's waiting ones. Without the limit the flood's three
// prompts fill the step.
TEST(FairPolicy, MaxLongPartialPrefillsKeepsAFloodToOneChunkAStep) {
  for (const int max_long : {1, 0}) {
    SCOPED_TRACE(max_long);
    Scheduler s = test::make_scheduler({.num_blocks = 256, .block_size = 4, .max_num_seqs = 8,
                                        .max_num_batched_tokens = 32, .max_model_len = 256, .policy = kFair,
                                        .long_prefill_token_threshold = 8, .max_long_partial_prefills = max_long});
    for (SeqId id = 1; id <= 3; ++id) s.add(tenant_request(id, "noisy", 0.3f, 100, 4));
    if (max_long == 1) {
      EXPECT_EQ(step(s), (std::map<SeqId, int>{{1, 8}}));
    } else {
      EXPECT_EQ(step(s), (std::map<SeqId, int>{{1, 8}, {2, 8}, {3, 8}}));
    }
    s.add(tenant_request(10, "light", 0.8f, 8, 4));
    s.add(tenant_request(11, "light", 0.8f, 6, 4));
    if (max_long == 1) {
      EXPECT_EQ(step(s), (std::map<SeqId, int>{{1, 8}, {10, 8}, {11, 6}}));
    } else {
      EXPECT_EQ(step(s), (std::map<SeqId, int>{{1, 8}, {2, 8}, {3, 2}, {10, 8}, {11, 6}}));  // a 32-token step
    }
  }
}

// A flooding tenant with prompt_tokens_per_step 8: its prompts compute 8 tokens a step together, under fair and fcfs,
// and a light tenant's prompt goes whole in the step it arrives for.
TEST(FairPolicy, ATenantsPromptTokensPerStepBoundItsChunksTogether) {
  for (const SchedulingPolicy policy : {kFair, SchedulingPolicy::kFcfs}) {
    SCOPED_TRACE(to_string(policy));
    Scheduler s = test::make_scheduler({.num_blocks = 256, .block_size = 4, .max_num_seqs = 8,
                                        .max_num_batched_tokens = 32, .max_model_len = 256, .policy = policy});
    for (SeqId id = 1; id <= 3; ++id) {
      SequenceRequest r = tenant_request(id, "noisy", 0.3f, 100, 4);
      r.tenant.prompt_tokens_per_step = 8;
      s.add(std::move(r));
    }
    EXPECT_EQ(step(s), (std::map<SeqId, int>{{1, 8}}));
    s.add(tenant_request(10, "light", 0.8f, 20, 4));
    EXPECT_EQ(step(s), (std::map<SeqId, int>{{1, 8}, {10, 20}}));
    EXPECT_EQ(step(s), (std::map<SeqId, int>{{1, 8}, {10, 1}}));
  }
}

// Two tenants keep prompts waiting, weights 3 and 1, the lighter one's first: while both are backlogged, fair
// computes their prompt tokens 3:1 (to within one chunk); fcfs serves the first arrivals only.
TEST(FairPolicy, BackloggedTenantsGetPromptTokensInProportionToTheirWeights) {
  for (const SchedulingPolicy policy : {kFair, SchedulingPolicy::kFcfs}) {
    SCOPED_TRACE(to_string(policy));
    Scheduler s = test::make_scheduler({.num_blocks = 1024, .block_size = 4, .max_num_seqs = 16,
                                        .max_num_batched_tokens = 16, .max_model_len = 256, .policy = policy});
    SeqId id = 1;
    for (int i = 0; i < 20; ++i) s.add(tenant_request(id++, "one", 1.0f, 64, 1));
    for (int i = 0; i < 20; ++i) s.add(tenant_request(id++, "three", 3.0f, 64, 1));
    std::map<std::string, int> computed;
    for (int n = 0; n < 40; ++n) {
      for (const auto& [seq_id, tokens] : step(s)) {
        const Sequence* seq = s.find(seq_id);
        computed[seq ? seq->tenant.name : (seq_id <= 20 ? "one" : "three")] += tokens;
      }
    }
    EXPECT_EQ(computed["one"] + computed["three"], 40 * 16);
    if (policy == kFair) {
      // 640 tokens: 480 and 160 exactly in proportion; a chunk (16) either way at most.
      EXPECT_NEAR(computed["three"], 480, 16);
      EXPECT_NEAR(computed["one"], 160, 16);
      EXPECT_NEAR(s.fair_share()->service("three"), s.fair_share()->service("one"), 16.0);
    } else {
      EXPECT_EQ(computed["one"], 640);
    }
  }
}

// Priority ranks before service: a light tenant's prompt at a lower priority (a larger value) waits for the
// heavy tenant's prompt work at priority 0.
TEST(FairPolicy, PriorityComesBeforeService) {
  Scheduler s = test::make_scheduler({.num_blocks = 256, .block_size = 4, .max_num_seqs = 8,
                                      .max_num_batched_tokens = 32, .max_model_len = 256, .policy = kFair});
  s.add(tenant_request(1, "heavy", 0.3f, 100, 4, /*priority=*/0));
  EXPECT_EQ(step(s), (std::map<SeqId, int>{{1, 32}}));
  s.add(tenant_request(2, "light", 0.8f, 8, 4, /*priority=*/1));
  EXPECT_EQ(step(s), (std::map<SeqId, int>{{1, 32}}));
  EXPECT_EQ(step(s), (std::map<SeqId, int>{{1, 32}}));
  EXPECT_EQ(step(s), (std::map<SeqId, int>{{1, 4}, {2, 8}}));
}

// A tenant at its KV cap admits nothing more this step; other tenants' requests are admitted past it.
TEST(FairPolicy, ATenantAtItsCapWaitsAndOthersGoPastIt) {
  Scheduler s = test::make_scheduler({.num_blocks = 256, .block_size = 4, .max_num_seqs = 8,
                                      .max_num_batched_tokens = 64, .max_model_len = 256, .policy = kFair});
  for (SeqId id : {1, 2}) {  // each may hold the cap alone; the first takes it whole at once
    SequenceRequest r = tenant_request(id, "capped", 1.0f, id == 1 ? 5 : 4, id == 1 ? 3 : 4);
    r.tenant.kv_cap = 8;  // tokens: two blocks
    s.add(std::move(r));
  }
  s.add(tenant_request(3, "free", 1.0f, 12, 4));  // its finish tag (12) after the capped second's (5 + 4)
  EXPECT_EQ(step(s), (std::map<SeqId, int>{{1, 5}, {3, 12}}));
  EXPECT_EQ(s.find(2)->status, SeqStatus::kWaiting);
}

// Decodes are planned before any prompt work, whatever the tenants' service: here the decode's finish tag
// (160 + 1 / 0.05 = 180) is behind the light prompt's (160 + 16 = 176), and the prompt would take the whole budget.
TEST(FairPolicy, DecodesGoBeforePromptWork) {
  Scheduler s = test::make_scheduler({.num_blocks = 256, .block_size = 4, .max_num_seqs = 8,
                                      .max_num_batched_tokens = 16, .max_model_len = 256, .policy = kFair});
  s.add(tenant_request(1, "heavy", 0.05f, 8, 8));
  EXPECT_EQ(step(s), (std::map<SeqId, int>{{1, 8}}));
  EXPECT_NEAR(s.fair_share()->service("heavy"), 160.0, 1e-4);  // 8 / 0.05f
  s.add(tenant_request(2, "light", 1.0f, 64, 4));  // raised to heavy's 160
  EXPECT_EQ(step(s), (std::map<SeqId, int>{{1, 1}, {2, 15}}));
}

}  // namespace
}  // namespace pagoda
