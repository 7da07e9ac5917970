// Long random simulations: requests with shared prefixes, salts and priorities arrive, run, get
// aborted or preempted on a small pool. Every step keeps the limits and the block invariants, and
// every request that is not aborted finishes with exactly the tokens the fake model sampled for it,
// also with async scheduling (each step planned before the previous step's tokens are applied).
// The slo policy's runs add tenants whose outputs stop at different lengths (its remaining-work estimate)
// and SLO targets on a simulated clock (its protection of requests already late). The fair policy's runs give
// the tenants different weights.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <random>

#include "pagoda/core/error.h"
#include "pagoda/sched/scheduler.h"
#include "sched_test_util.h"

namespace pagoda {
namespace {

struct SimParams {
  uint32_t seed = 1;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  bool prefix_caching = true;
  int num_blocks = 24;
  int block_size = 4;
  int max_num_seqs = 6;
  int max_num_batched_tokens = 24;
  int max_model_len = 72;
  bool async_scheduling = false;
  // LRU-K reads the steady clock: its victims may differ from run to run, what the test checks does not.
  EvictionPolicyKind eviction = EvictionPolicyKind::kLru;
  // Requests of tenants "chat" (stopping after 3 tokens whatever their max_tokens), "batch" and none.
  bool tenants = false;
  SloTargets slo{};  // the slo policy's, on a clock that advances 10 ms a step
};

// A planned step and its fake tokens, drawn at "launch" (right after planning).
struct Launched {
  StepPlan plan;
  std::vector<TokenId> sampled;
};

class SchedulerRandomTest : public ::testing::TestWithParam<SimParams> {};

TEST_P(SchedulerRandomTest, EveryRequestFinishesAndInvariantsHold) {
  const SimParams p = GetParam();
  double now = 0;
  Scheduler s(SchedulerConfig{p.max_num_seqs, p.max_num_batched_tokens, p.max_model_len, p.policy, p.slo},
              BlockManagerOptions{.num_blocks = p.num_blocks, .block_size = p.block_size,
                                  .enable_prefix_caching = p.prefix_caching, .eviction_policy = p.eviction,
                                  .lru_k = LruKOptions{.k = 2, .correlated_period_seconds = 0}},
              [&now] { return now; });
  std::mt19937 rng(p.seed);
  const auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

  // A few shared "system prompts" so that prefix hits happen.
  std::vector<std::vector<TokenId>> prefixes;
  for (int i = 0; i < 3; ++i) prefixes.push_back(test::iota_tokens(uniform(4, 20), 10000 * (i + 1)));

  struct Expected {
    int max_tokens;
    int num_prompt;
    bool aborted = false;
    bool finished = false;
    std::vector<TokenId> outputs;
    std::string tenant;
  };
  std::map<SeqId, Expected> requests;
  SeqId next_id = 1;
  const int kNumRequests = 300;
  int num_steps = 0, num_rejected = 0;
  // Async scheduling only: preempted while holding a placeholder; tokens dropped because their sequence
  // stopped or was aborted after the step was planned.
  int num_preempted_with_placeholder = 0, num_dropped = 0;
  const TokenId kStopToken = test::fake_token(0, 0);  // rare, exercises the stop check
  const int kChatLength = 3;
  const auto stop = [&](const Sequence& seq) {
    return seq.token_ids.back() == kStopToken || (seq.tenant.name == "chat" && seq.num_output_tokens() >= kChatLength);
  };
  // Steps in which some running request was already past its SLO, and preemptions of such requests.
  int num_steps_with_late = 0, num_late_preempted = 0;

  std::optional<Launched> in_flight;
  while ((next_id <= kNumRequests || s.has_unfinished() || in_flight) && num_steps < 20000) {
    // Arrivals.
    const int num_arrivals = next_id <= kNumRequests ? uniform(0, 2) : 0;
    for (int a = 0; a < num_arrivals && next_id <= kNumRequests; ++a) {
      std::vector<TokenId> prompt;
      if (uniform(0, 3) > 0) prompt = prefixes[uniform(0, 2)];
      const int num_own = uniform(prompt.empty() ? 1 : 0, 30);
      for (int i = 0; i < num_own; ++i) prompt.push_back(static_cast<TokenId>(uniform(0, 500)));
      const int max_tokens = uniform(1, 30);
      const SeqId id = next_id++;
      const std::string salt = uniform(0, 5) == 0 ? "tenant-x" : "";
      SequenceRequest request = test::make_request(id, prompt, max_tokens, uniform(0, 3), salt);
      if (p.tenants) {
        const int t = uniform(0, 2);
        request.tenant.name = std::vector<std::string>{"", "chat", "batch"}[t];
        if (p.policy == SchedulingPolicy::kFair) request.tenant.weight = std::vector<float>{1.0f, 2.0f, 0.25f}[t];
      }
      const std::string tenant = request.tenant.name;
      try {
        s.add(std::move(request));
        requests[id] = Expected{max_tokens, static_cast<int>(prompt.size()), false, false, {}, tenant};
      } catch (const InvalidRequest&) {
        ++num_rejected;  // too long for this pool: never admitted
      }
    }
    // Occasional abort of a random live request.
    if (uniform(0, 40) == 0 && s.has_unfinished()) {
      for (auto& [id, e] : requests) {
        if (!e.finished && !e.aborted && uniform(0, 3) == 0) {
          ASSERT_TRUE(s.abort(id));
          e.aborted = true;
          break;
        }
      }
    }

    now += 0.01;
    bool late = false;
    for (const auto& [id, e] : requests) {
      const Sequence* seq = s.find(id);
      late = late || (seq != nullptr && seq->status == SeqStatus::kRunning && past_slo(*seq, p.slo, now));
    }
    num_steps_with_late += late;
    Launched next{s.schedule(), {}};
    for (SeqId id : next.plan.preempted) {
      num_preempted_with_placeholder += s.find(id)->num_output_placeholders > 0;
      num_late_preempted += past_slo(*s.find(id), p.slo, now);
    }
    test::expect_plan_valid(s, next.plan);
    ASSERT_EQ(s.check_invariants(), "") << "after schedule, step " << num_steps;
    if (s.has_unfinished() && !in_flight) {
      ASSERT_FALSE(next.plan.empty()) << "no progress at step " << num_steps;
    }
    next.sampled = test::fake_sample(next.plan);
    // Synchronous: apply this step now. Async: apply the previous one, keep this one in flight.
    std::optional<Launched> done = std::exchange(in_flight, std::nullopt);
    if (!p.async_scheduling) {
      done = std::move(next);
    } else if (!next.plan.empty()) {
      in_flight = std::move(next);
    }
    const std::vector<SequenceOutput> outputs =
        done ? s.update(done->plan, done->sampled, stop) : std::vector<SequenceOutput>{};
    if (done) num_dropped += static_cast<int>(done->sampled.size() - outputs.size());
    ASSERT_EQ(s.check_invariants(), "") << "after update, step " << num_steps;
    for (const SequenceOutput& o : outputs) {
      Expected& e = requests.at(o.seq_id);
      ASSERT_FALSE(e.finished);
      ASSERT_EQ(o.token, test::fake_token(o.seq_id, static_cast<int>(e.outputs.size())));
      e.outputs.push_back(o.token);
      ASSERT_EQ(o.num_output_tokens, static_cast<int>(e.outputs.size()));
      if (o.finish_reason != FinishReason::kNone) {
        e.finished = true;
        if (o.finish_reason == FinishReason::kLength) {
          EXPECT_TRUE(static_cast<int>(e.outputs.size()) == e.max_tokens ||
                      e.num_prompt + static_cast<int>(e.outputs.size()) == p.max_model_len);
        } else {
          EXPECT_EQ(o.finish_reason, FinishReason::kStop);
          EXPECT_TRUE(o.token == kStopToken || (e.tenant == "chat" && static_cast<int>(e.outputs.size()) == kChatLength));
        }
      }
    }
    ++num_steps;
  }

  EXPECT_FALSE(s.has_unfinished()) << "requests left after " << num_steps << " steps";
  for (const auto& [id, e] : requests) EXPECT_TRUE(e.finished || e.aborted) << "request " << id;
  EXPECT_EQ(s.block_manager().usage(), 0.0) << "leaked blocks";
  EXPECT_EQ(s.check_invariants(), "");
  if (p.async_scheduling) {
    EXPECT_GT(num_preempted_with_placeholder, 0);
    EXPECT_GT(num_dropped, 0);
  } else {
    EXPECT_EQ(num_preempted_with_placeholder, 0);
    EXPECT_EQ(num_dropped, 0);
  }
  const PrefixCacheStats& stats = s.block_manager().prefix_cache_stats();
  if (p.prefix_caching) {
    EXPECT_GT(stats.num_hit_tokens, 0u);
  } else {
    EXPECT_EQ(stats.num_hit_tokens, 0u);
  }
  if (p.tenants) {  // the estimate learned the tenants' lengths: chat's stop at 3, batch's are longer
    const OutputLengthStats& lengths = s.output_lengths();
    ASSERT_GT(lengths.num_recorded("chat"), 10);
    ASSERT_GT(lengths.num_recorded("batch"), 10);
    EXPECT_LE(*lengths.expected("chat"), kChatLength);
    EXPECT_GT(*lengths.expected("batch"), *lengths.expected("chat"));
  }
  if (p.slo.ttft_seconds > 0 || p.slo.tpot_seconds > 0) {
    EXPECT_GT(num_steps_with_late, 0) << "the targets never applied";
  } else {
    EXPECT_EQ(num_late_preempted, 0);
  }
  RecordProperty("steps", num_steps);
  RecordProperty("preemptions", static_cast<int>(s.num_preemptions()));
  std::printf("seed %u%s: %d steps, %d requests (%d rejected), %llu preemptions (%d holding a placeholder, %d past "
              "their SLO; %d steps with one running), %d tokens dropped, %llu/%llu prefix tokens hit\n",
              p.seed, p.async_scheduling ? " async" : "", num_steps, static_cast<int>(requests.size()), num_rejected,
              static_cast<unsigned long long>(s.num_preemptions()), num_preempted_with_placeholder, num_late_preempted,
              num_steps_with_late, num_dropped,
              static_cast<unsigned long long>(stats.num_hit_tokens),
              static_cast<unsigned long long>(stats.num_queried_tokens));
}

// Every simulation synchronous and with async scheduling.
std::vector<SimParams> sims() {
  const SimParams base[] = {
      SimParams{.seed = 1}, SimParams{.seed = 2, .policy = SchedulingPolicy::kPriority},
      SimParams{.seed = 3, .prefix_caching = false},
      SimParams{.seed = 4, .policy = SchedulingPolicy::kPriority, .num_blocks = 12, .block_size = 8},
      SimParams{.seed = 5, .num_blocks = 64, .max_num_seqs = 16, .max_num_batched_tokens = 64},
      SimParams{.seed = 6, .num_blocks = 19, .block_size = 4, .max_num_seqs = 3, .max_num_batched_tokens = 5},
      SimParams{.seed = 7, .eviction = EvictionPolicyKind::kLruK},
      SimParams{.seed = 8, .policy = SchedulingPolicy::kPriority, .num_blocks = 12, .block_size = 8,
                .eviction = EvictionPolicyKind::kLruK},
      // The slo policy: remaining work from max_tokens alone, then with tenants, then with SLO targets tight
      // enough that many running requests are past them (every candidate, at times).
      SimParams{.seed = 9, .policy = SchedulingPolicy::kSlo},
      SimParams{.seed = 10, .policy = SchedulingPolicy::kSlo, .num_blocks = 12, .block_size = 8, .tenants = true},
      SimParams{.seed = 11, .policy = SchedulingPolicy::kSlo, .tenants = true,
                .slo = {.ttft_seconds = 0.05, .tpot_seconds = 0.02}},
      SimParams{.seed = 12, .policy = SchedulingPolicy::kSlo, .num_blocks = 19, .max_num_seqs = 3,
                .max_num_batched_tokens = 5, .tenants = true, .slo = {.ttft_seconds = 0.1, .tpot_seconds = 0.015}},
      // The fair policy: weighted tenants, then a pool small enough to preempt often.
      SimParams{.seed = 13, .policy = SchedulingPolicy::kFair, .tenants = true},
      SimParams{.seed = 14, .policy = SchedulingPolicy::kFair, .num_blocks = 12, .block_size = 8, .tenants = true},
      SimParams{.seed = 15, .policy = SchedulingPolicy::kFair, .num_blocks = 19, .max_num_seqs = 3,
                .max_num_batched_tokens = 5, .tenants = true}};
  std::vector<SimParams> out;
  for (bool async_scheduling : {false, true}) {
    for (SimParams p : base) {
      p.async_scheduling = async_scheduling;
      out.push_back(p);
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Sims, SchedulerRandomTest, ::testing::ValuesIn(sims()), [](const auto& info) {
  return "seed" + std::to_string(info.param.seed) + (info.param.async_scheduling ? "_async" : "_sync") +
         (info.param.eviction == EvictionPolicyKind::kLruK ? "_lruk" : "") +
         (info.param.policy == SchedulingPolicy::kSlo ? "_slo" : info.param.policy == SchedulingPolicy::kFair ? "_fair" : "");
});

}  // namespace
}  // namespace pagoda
