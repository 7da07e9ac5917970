// The SLO-aware batch controller (sched/batch_controller.h), without a model: its rule against a step-time
// model taught a known linear cost, its bounds, and a simulated server (arrivals, an FCFS queue, steps whose
// time is that cost) under a step change of load, where it must keep running requests within the TPOT
// target that a large static budget breaks, and get first tokens out sooner than a small static budget.
#include "pagoda/sched/batch_controller.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>

#include "pagoda/sched/arrival_rate.h"

namespace pagoda {
namespace {

// The "true" cost of a step: 2 ms, 10 us a prompt token, 50 us a decode, 2 ns a KV token read, 1 ns a pair.
double true_seconds(const StepShape& s) {
  return 2e-3 + 10e-6 * s.prefill_tokens + 50e-6 * s.decode_seqs + 2e-9 * s.decode_kv_tokens + 1e-9 * s.prefill_pairs;
}

StepTimeModel taught_model() {
  StepTimeModel m;
  std::mt19937 rng(1);
  for (int i = 0; i < 400; ++i) {
    StepShape s;
    s.prefill_tokens = rng() % 2048;
    s.decode_seqs = rng() % 128;
    s.decode_kv_tokens = s.decode_seqs * (rng() % 2048);
    s.prefill_pairs = s.prefill_tokens * (s.prefill_tokens + 1) / 2;
    m.update(s, true_seconds(s));
  }
  return m;
}

TEST(BatchController, StaticWithoutATargetOrBeforeTheModelHasLearned) {
  const StepTimeModel fresh;
  ControllerInputs in{.decode_seqs = 10, .pending = {{5000, 0.0}}};
  EXPECT_EQ(BatchController({.ttft_seconds = 1, .tpot_seconds = 0}, 4096).decide(taught_model(), in).token_budget, 4096);
  EXPECT_EQ(BatchController({.ttft_seconds = 1, .tpot_seconds = 0.01}, 4096).decide(fresh, in).token_budget, 4096);
}

TEST(BatchController, TakesThePrefillThatKeepsTheStepWithinTheTpotTarget) {
  const StepTimeModel model = taught_model();
  // 20 decodes reading 20 x 1000 KV tokens: 2 + 1 + 0.04 ms; a 10 ms target leaves ~6.96 ms of prefill at
  // 10 us a token plus the chunk's pairs: about 674 tokens.
  ControllerInputs in{.decode_seqs = 20, .decode_kv_tokens = 20000, .pending = {{100000, 0.0}}};
  const ControllerDecision d = BatchController({.ttft_seconds = 0, .tpot_seconds = 0.010}, 4096).decide(model, in);
  int expected = 0;
  while (true_seconds({expected + 1, 20, 20000, (expected + 1) * (expected + 2) / 2}) <= 0.010) ++expected;
  EXPECT_NEAR(d.p_tpot, expected, 3);
  EXPECT_EQ(d.token_budget, 20 + d.p_tpot);
  EXPECT_LE(true_seconds({d.token_budget - 20, 20, 20000, 0}), 0.0101);
}

TEST(BatchController, WaitingPromptsGetWhatTheirTtftDeadlinesNeed) {
  const StepTimeModel model = taught_model();
  const BatchController c({.ttft_seconds = 0.5, .tpot_seconds = 0.010}, 4096);
  // (Waits are chosen off the step boundaries, so that floating-point rounding cannot move a step.)
  ControllerInputs in{.decode_seqs = 20, .decode_kv_tokens = 20000, .pending = {{3000, 0.105}}};
  EXPECT_EQ(c.decide(model, in).p_ttft, 77);  // 3000 tokens over the 39 steps of 10 ms left
  in.pending = {{3000, 0.495}};                                          // under one step left: all of it now
  EXPECT_EQ(c.decide(model, in).p_ttft, 3000);
  // Behind an older prompt, a younger one needs the tokens ahead of it too: (2000 + 1000) / 10 steps.
  in.pending = {{2000, 0.345}, {1000, 0.395}};
  EXPECT_EQ(c.decide(model, in).p_ttft, 300);
  // A prompt already past its deadline asks for nothing, but its tokens still come first.
  in.pending = {{3000, 0.7}};
  EXPECT_EQ(c.decide(model, in).p_ttft, 0);
  in.pending = {{3000, 0.7}, {1000, 0.305}};
  EXPECT_EQ(c.decide(model, in).p_ttft, 211);  // (3000 + 1000) / 19 steps
  // The step after the waiting tokens jump, the budget follows them (no smoothing to wait out).
  in.pending = {{30000, 0.305}};
  EXPECT_EQ(c.decide(model, in).p_ttft, std::min(4096 - 20, 30000 / 19 + 1));
}

TEST(BatchController, ArrivalRateKeepsPrefillAtTheRatePromptsArrive) {
  const StepTimeModel model = taught_model();
  ControllerInputs in{.decode_seqs = 100, .decode_kv_tokens = 100 * 4000, .arrival_rate = 40, .mean_prompt_tokens = 1000};
  const ControllerDecision d = BatchController({.ttft_seconds = 0, .tpot_seconds = 0.020}, 4096).decide(model, in);
  EXPECT_EQ(d.p_rate, 800);  // 40 req/s x 1000 tokens x 20 ms
  EXPECT_GE(d.token_budget, 100 + 800);
}

TEST(BatchController, BoundsHold) {
  const StepTimeModel model = taught_model();
  std::mt19937 rng(3);
  for (int i = 0; i < 2000; ++i) {
    const int max_budget = 256 + static_cast<int>(rng() % 4096);
    ControllerInputs in;
    in.decode_seqs = rng() % 300;
    in.decode_kv_tokens = in.decode_seqs * (rng() % 8000);
    for (int k = static_cast<int>(rng() % 5); k > 0; --k) in.pending.push_back({rng() % 20000, (rng() % 3000) / 1000.0});
    in.arrival_rate = (rng() % 100) / 2.0;
    in.mean_prompt_tokens = rng() % 4000;
    const BatchController c({.ttft_seconds = (rng() % 2000) / 1000.0, .tpot_seconds = 0.001 + (rng() % 100) / 1000.0},
                            max_budget);
    const ControllerDecision d = c.decide(model, in);
    EXPECT_LE(d.token_budget, max_budget);
    const int decodes = static_cast<int>(std::min<int64_t>(in.decode_seqs, max_budget));
    EXPECT_GE(d.token_budget, decodes + std::min(BatchController::kMinPrefill, max_budget - decodes));
    EXPECT_EQ(c.decide(model, in).token_budget, d.token_budget) << "the same state, the same budget";
  }
}

// A simulated server: Poisson arrivals (1,024-token prompts, 128-token outputs) at 4 req/s, then 24 req/s
// from t = 20 s; FCFS; each step prefills prompts in order within the budget and decodes every running
// request; steps take true_seconds. Returns the share of decode steps over the TPOT target and the mean
// time to first token.
struct SimResult {
  double tpot_violations = 0;  // steps with decodes that took longer than the target
  double mean_ttft = 0;
  int finished = 0;
  int good = 0;  // finished within both SLOs (goodput's count)
};

SimResult simulate(std::optional<BatchController> controller, int static_budget, double tpot_target,
                   double fast_rate = 24.0, double ttft_slo = 0.2, double tpot_slo = 1.0) {
  struct Req {
    double arrived;
    int prompt_left = 1024, output_left = 128;
    double first_token = -1, finished = -1;
  };
  std::mt19937 rng(7);
  std::exponential_distribution<double> gap_slow(4.0), gap_fast(fast_rate);
  std::deque<double> arrivals;
  for (double t = 0; t < 40;) {
    t += t < 20 ? gap_slow(rng) : gap_fast(rng);
    arrivals.push_back(t);
  }
  StepTimeModel model;
  ArrivalRates rates;
  std::deque<Req> waiting;
  std::vector<Req> running, done;
  double now = 0;
  int steps_with_decodes = 0, violations = 0;
  while (now < 45 && (!arrivals.empty() || !waiting.empty() || !running.empty())) {
    while (!arrivals.empty() && arrivals.front() <= now) {
      waiting.push_back(Req{arrivals.front()});
      rates.arrive(arrivals.front(), "", 1024);
      arrivals.pop_front();
    }
    if (waiting.empty() && running.empty()) {
      now = arrivals.front();
      continue;
    }
    StepShape shape;
    for (const Req& r : running) {
      ++shape.decode_seqs;
      shape.decode_kv_tokens += 1024 + (128 - r.output_left);
    }
    int budget = static_budget;
    if (controller) {
      ControllerInputs in{.decode_seqs = shape.decode_seqs, .decode_kv_tokens = shape.decode_kv_tokens};
      for (const Req& r : waiting) in.pending.push_back({r.prompt_left, now - r.arrived});
      in.arrival_rate = rates.rate(now);
      in.mean_prompt_tokens = rates.mean_prompt_tokens();
      budget = controller->decide(model, in).token_budget;
    }
    int left = budget - static_cast<int>(shape.decode_seqs);
    std::vector<Req*> prefilled;
    for (Req& r : waiting) {
      if (left <= 0) break;
      const int take = std::min(left, r.prompt_left);
      r.prompt_left -= take;
      left -= take;
      shape.prefill_tokens += take;
      shape.prefill_pairs += int64_t{take} * (take + 1) / 2;
    }
    const double seconds = true_seconds(shape);
    model.update(shape, seconds);
    now += seconds;
    if (shape.decode_seqs > 0) {
      ++steps_with_decodes;
      violations += seconds > tpot_target;
    }
    for (Req& r : running) --r.output_left;
    while (!waiting.empty() && waiting.front().prompt_left == 0) {
      waiting.front().first_token = now;
      running.push_back(waiting.front());
      waiting.pop_front();
    }
    for (size_t i = 0; i < running.size();) {
      if (running[i].output_left <= 0) {
        running[i].finished = now;
        done.push_back(running[i]);
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
  SimResult out;
  out.tpot_violations = static_cast<double>(violations) / std::max(steps_with_decodes, 1);
  for (const Req& r : done) {
    out.mean_ttft += r.first_token - r.arrived;
    out.good += r.first_token - r.arrived <= ttft_slo && (r.finished - r.first_token) / 127 <= tpot_slo;
  }
  out.finished = static_cast<int>(done.size());
  out.mean_ttft /= std::max(out.finished, 1);
  return out;
}

TEST(BatchController, SimulatedStepChangeOfLoad) {
  const double tpot = 0.012;
  const SimResult adaptive = simulate(BatchController({.ttft_seconds = 1.0, .tpot_seconds = tpot}, 4096), 0, tpot);
  const SimResult big = simulate(std::nullopt, 4096, tpot);
  const SimResult small = simulate(std::nullopt, 256, tpot);
  std::printf("adaptive: %.1f%% steps over TPOT, TTFT %.3f s, %d done; static 4096: %.1f%%, %.3f s, %d; static 256: "
              "%.1f%%, %.3f s, %d\n",
              100 * adaptive.tpot_violations, adaptive.mean_ttft, adaptive.finished, 100 * big.tpot_violations,
              big.mean_ttft, big.finished, 100 * small.tpot_violations, small.mean_ttft, small.finished);
  EXPECT_LT(adaptive.tpot_violations, 0.5 * big.tpot_violations);  // keeps the decodes' pace a big budget breaks
  EXPECT_LT(adaptive.mean_ttft, small.mean_ttft);                   // and serves prompts sooner than a small one
  EXPECT_GE(adaptive.finished, small.finished);
}

// The same server pushed past what it can serve (100 req/s in the second phase): the controller keeps the
// throughput of the best static budget. (Goodput at TTFT <= 200 ms, TPOT <= 14 ms is printed, not held: once
// the queue is late, no token budget saves it; that needs admission by deadline, issue 17's later work.)
TEST(BatchController, SimulatedOverloadKeepsThroughput) {
  const double ttft = 0.2, tpot_slo = 0.014;
  const SimResult adaptive =
      simulate(BatchController({.ttft_seconds = ttft, .tpot_seconds = 0.010}, 4096), 0, 0.010, 100.0, ttft, tpot_slo);
  int most_finished = 0;
  for (int budget : {512, 1024, 2048, 4096}) {
    const SimResult r = simulate(std::nullopt, budget, 0.010, 100.0, ttft, tpot_slo);
    std::printf("static %d: %d finished, %d good\n", budget, r.finished, r.good);
    most_finished = std::max(most_finished, r.finished);
  }
  std::printf("adaptive: %d finished, %d good\n", adaptive.finished, adaptive.good);
  EXPECT_GE(adaptive.finished, most_finished * 95 / 100);
}

TEST(ArrivalRates, SteadyRateReadsItsRateAndFollowsAStep) {
  ArrivalRates r(5.0);
  for (int i = 0; i < 400; ++i) r.arrive(i * 0.1, i % 2 ? "a" : "b", 100);  // 10 req/s for 40 s
  EXPECT_NEAR(r.rate(40.0), 10.0, 0.6);
  EXPECT_NEAR(r.tenant_rate(40.0, "a"), 5.0, 0.4);
  for (int i = 0; i < 200; ++i) r.arrive(40.0 + i * 0.025, "a", 300);  // 40 req/s for 5 s
  EXPECT_GT(r.rate(45.0), 25.0);
  EXPECT_NEAR(r.mean_prompt_tokens(), 300, 1);
  EXPECT_LT(r.rate(75.0), 1.0);  // decays when arrivals stop
}

}  // namespace
}  // namespace pagoda
