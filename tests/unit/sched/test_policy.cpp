// Policy ordering, preemption victim choice, and token-budget packing.
#include "pagoda/sched/policy.h"

#include <gtest/gtest.h>

#include <limits>

#include "pagoda/core/error.h"
#include "pagoda/sched/scheduler_config.h"
#include "pagoda/sched/token_budget.h"
#include "sched_test_util.h"

namespace pagoda {
namespace {

Sequence make_seq(SeqId id, int priority, uint64_t arrival) {
  return Sequence(test::make_request(id, {1, 2, 3}, 4, priority), arrival);
}

TEST(Policy, FcfsOrdersByArrivalOnly) {
  const Sequence early = make_seq(1, 9, 0), late = make_seq(2, 0, 1);
  EXPECT_TRUE(schedules_before(SchedulingPolicy::kFcfs, early, late));
  EXPECT_FALSE(schedules_before(SchedulingPolicy::kFcfs, late, early));
  EXPECT_FALSE(schedules_before(SchedulingPolicy::kFcfs, early, early));
}

TEST(Policy, PriorityOrdersByPriorityThenArrival) {
  const Sequence a = make_seq(1, 5, 0), b = make_seq(2, 0, 1), c = make_seq(3, 0, 2);
  EXPECT_TRUE(schedules_before(SchedulingPolicy::kPriority, b, a));
  EXPECT_TRUE(schedules_before(SchedulingPolicy::kPriority, b, c));
  EXPECT_FALSE(schedules_before(SchedulingPolicy::kPriority, a, c));
}

TEST(Policy, TheTenantsPriorityOrdersBeforeTheRequestsOwn) {
  // A request of a tenant at 1 asking for the lowest priority value still runs after a tenant at 0's, under every
  // priority policy, and is the preemption victim before it.
  SequenceRequest r = test::make_request(1, {1, 2, 3}, 4, std::numeric_limits<int>::min());
  r.tenant = TenantKv{.name = "bulk", .priority = 1};
  Sequence bulk(std::move(r), 0);
  SequenceRequest q = test::make_request(2, {1, 2, 3}, 4, 7);
  q.tenant = TenantKv{.name = "live"};
  Sequence live(std::move(q), 1);
  for (const auto policy : {SchedulingPolicy::kPriority, SchedulingPolicy::kSlo, SchedulingPolicy::kFair}) {
    EXPECT_TRUE(schedules_before(policy, live, bulk)) << to_string(policy);
    EXPECT_FALSE(schedules_before(policy, bulk, live)) << to_string(policy);
    std::vector<Sequence*> running = {&bulk, &live};
    EXPECT_EQ(pick_preemption_victim(policy, running), 0u) << to_string(policy);
  }
}

TEST(Policy, VictimIsLowestPriorityLatestArrived) {
  Sequence a = make_seq(1, 0, 0), b = make_seq(2, 3, 1), c = make_seq(3, 3, 2), d = make_seq(4, 1, 3);
  std::vector<Sequence*> running = {&a, &b, &c, &d};
  EXPECT_EQ(pick_preemption_victim(SchedulingPolicy::kPriority, running), 2u);  // c: priority 3, later than b
  EXPECT_EQ(pick_preemption_victim(SchedulingPolicy::kFcfs, running), 3u);      // d: latest arrival
}

TEST(Policy, Parse) {
  EXPECT_EQ(parse_scheduling_policy("fcfs"), SchedulingPolicy::kFcfs);
  EXPECT_EQ(parse_scheduling_policy("priority"), SchedulingPolicy::kPriority);
  EXPECT_THROW(parse_scheduling_policy("lifo"), Error);
}

TEST(TokenBudget, ChunksWhatDoesNotFit) {
  TokenBudget budget(10);
  EXPECT_EQ(budget.chunk_for(1), 1);
  budget.take(1, 1);
  EXPECT_EQ(budget.chunk_for(25), 9);  // a long prompt gets the rest as a chunk
  budget.take(9, 25);
  EXPECT_TRUE(budget.exhausted());
  EXPECT_EQ(budget.chunk_for(3), 0);
  EXPECT_EQ(budget.num_used(), 10);
}

TEST(TokenBudget, LimitsLongPrefillsPerStep) {
  TokenBudget budget(100, 8, 1);  // chunks of at most 8; one sequence with more than 8 pending a step
  EXPECT_FALSE(budget.is_long(8));
  EXPECT_TRUE(budget.is_long(9));
  EXPECT_EQ(budget.chunk_for(30), 8);
  budget.take(8, 30);
  EXPECT_EQ(budget.chunk_for(30), 0);  // a second long prefill waits
  EXPECT_EQ(budget.chunk_for(9), 0);
  EXPECT_EQ(budget.chunk_for(8), 8);   // short ones go ahead
  budget.take(8, 8);
  EXPECT_EQ(budget.chunk_for(1), 1);
  TokenBudget unlimited(100, 8);
  unlimited.take(8, 30);
  EXPECT_EQ(unlimited.chunk_for(30), 8);
  TokenBudget no_chunks(100, 0, 1);  // without a chunk limit nothing is long
  no_chunks.take(50, 60);
  EXPECT_EQ(no_chunks.chunk_for(60), 50);
}

TEST(TokenBudget, BoundsATenantsPromptTokensTogether) {
  TokenBudget budget(100);
  TenantKv noisy{.name = "noisy"};
  noisy.prompt_tokens_per_step = 12;
  const TenantKv other{.name = "other"};
  EXPECT_EQ(budget.chunk_for(30, &noisy), 12);
  budget.take(10, 30, &noisy);
  EXPECT_EQ(budget.chunk_for(30, &noisy), 2);  // its sequences together
  EXPECT_EQ(budget.chunk_for(95, &other), 90);
  EXPECT_EQ(budget.chunk_for(1, &noisy), 1);   // a decode is not prompt work
  budget.take(2, 30, &noisy);
  EXPECT_EQ(budget.chunk_for(30, &noisy), 0);
  budget.take(1, 1, &noisy);
  EXPECT_EQ(budget.chunk_for(1, &noisy), 1);
  EXPECT_EQ(budget.num_used(), 13);
}

TEST(SchedulerConfig, Validation) {
  SchedulerConfig config;
  EXPECT_NO_THROW(validate(config));
  config.max_num_batched_tokens = config.max_num_seqs - 1;
  EXPECT_THROW(validate(config), Error);
  config = SchedulerConfig{};
  config.max_model_len = 1;
  EXPECT_THROW(validate(config), Error);
}

}  // namespace
}  // namespace pagoda
