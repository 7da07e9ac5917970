// The precision fallback's rule without a model (sched/precision_fallback.h): simulated inter-token latencies
// and step-time ratios. The latency window against exact quantiles and as time slides; the switch to the
// fallback once the P99 passes the target (not before a window is judged), the way back only on a primary
// prediction within 80% of the target and after the dwell, no flapping under a steady load; a fallback whose
// steps are measured no faster than the primary's model predicts declined, with a cool-down; with a TTFT target,
// late first tokens switching and the primary's predicted prompt load holding the fallback, and that load's formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "pagoda/sched/precision_fallback.h"

namespace pagoda {
namespace {

TEST(LatencyWindow, QuantilesWithinABinOfTheExactOnes) {
  LatencyWindow w(60);
  std::mt19937 rng(7);
  std::lognormal_distribution<double> dist(std::log(0.03), 0.6);
  std::vector<double> xs;
  for (int i = 0; i < 20000; ++i) {
    xs.push_back(dist(rng));
    w.add(1.0 + i * 1e-4, xs.back());
  }
  std::sort(xs.begin(), xs.end());
  EXPECT_EQ(w.count(3.0), 20000);
  for (double q : {0.5, 0.9, 0.99}) {
    const double exact = xs[static_cast<size_t>(std::ceil(q * xs.size())) - 1];
    EXPECT_NEAR(w.quantile(3.0, q), exact, 0.021 * exact) << q;  // bins are 2% wide
  }
  EXPECT_EQ(LatencyWindow(60).quantile(0, 0.99), 0);  // empty
}

TEST(LatencyWindow, OldLatenciesLeaveTheWindow) {
  LatencyWindow w(10, 10);  // slices of 1 s
  for (int i = 0; i < 100; ++i) w.add(0.5, 1.0);  // slow, early
  for (int i = 0; i < 100; ++i) w.add(5.5, 0.01);
  EXPECT_EQ(w.count(9.9), 200);
  EXPECT_NEAR(w.quantile(9.9, 0.99), 1.0, 0.02);
  // At 10.5 s the slice of 0-1 s has left a 10 s window; only the fast latencies remain.
  EXPECT_EQ(w.count(10.5), 100);
  EXPECT_NEAR(w.quantile(10.5, 0.99), 0.01, 0.0002);
  EXPECT_EQ(w.count(16.0), 0);
  w.add(16.0, 0.2, 3);
  EXPECT_EQ(w.count(16.0), 3);
  w.clear();
  EXPECT_EQ(w.count(16.0), 0);
}

FallbackOptions options() {
  return FallbackOptions{.tpot_target_s = 0.040, .window_s = 20, .min_samples = 50, .min_dwell_s = 2};
}

// `n` latencies of `latency` at time t on `set`, with the given primary/fallback ratio.
void feed(PrecisionFallback& f, double t, WeightSet set, double latency, int n, double ratio = 0) {
  for (int i = 0; i < n; ++i) f.observe(t, set, latency, ratio);
}

TEST(PrecisionFallback, SwitchesWhenTheP99PassesTheTargetAndNotBefore) {
  PrecisionFallback f(options());
  feed(f, 1.0, WeightSet::kPrimary, 0.030, 200);
  EXPECT_FALSE(f.update(1.0));  // all within the target
  feed(f, 2.0, WeightSet::kPrimary, 0.060, 1);
  EXPECT_FALSE(f.update(2.0));  // 1 of 201 above: the P99 is still within
  feed(f, 2.1, WeightSet::kPrimary, 0.060, 3);
  EXPECT_TRUE(f.update(2.1));   // 4 of 204 above: past the P99
  EXPECT_EQ(f.current(), WeightSet::kFallback);
  EXPECT_EQ(f.stats().switches_to_fallback, 1u);
  EXPECT_GT(f.stats().window_p99_s, 0.040);

  PrecisionFallback g(options());
  feed(g, 1.0, WeightSet::kPrimary, 0.100, 49);
  EXPECT_FALSE(g.update(1.0));  // every one slow, but fewer than min_samples: not judged yet
  feed(g, 1.0, WeightSet::kPrimary, 0.100, 1);
  EXPECT_TRUE(g.update(1.0));   // reacts at the first update with a judged window
}

TEST(PrecisionFallback, GoesBackOnlyWhenThePrimaryIsPredictedWithinTheMargin) {
  PrecisionFallback f(options());
  feed(f, 1.0, WeightSet::kPrimary, 0.050, 100);
  ASSERT_TRUE(f.update(1.0));
  EXPECT_EQ(f.stats().window_count, 100);  // what it judged
  // The window starts empty on the fallback; latencies of steps launched before the switch are not counted.
  feed(f, 1.1, WeightSet::kPrimary, 0.050, 100);
  EXPECT_FALSE(f.update(1.1));
  EXPECT_EQ(f.stats().window_count, 0);
  // Fast on the fallback (30 ms) but the primary would still take 1.6x as long: 48 ms, above 32 ms.
  for (double t = 1.2; t < 20; t += 0.5) {
    feed(f, t, WeightSet::kFallback, 0.030, 20, 1.6);
    EXPECT_FALSE(f.update(t)) << t;  // no flapping under the same load
  }
  // Latencies whose ratio the models cannot give yet are not counted.
  PrecisionFallback g(options());
  feed(g, 1.0, WeightSet::kPrimary, 0.050, 100);
  ASSERT_TRUE(g.update(1.0));
  feed(g, 5.0, WeightSet::kFallback, 0.010, 100, 0);
  EXPECT_FALSE(g.update(5.0));
  EXPECT_EQ(g.current(), WeightSet::kFallback);
  EXPECT_EQ(g.stats().window_count, 0);

  // The load drops: 15 ms on the fallback, 24 ms predicted on the primary (<= 32 ms), but within the dwell
  // the set stays; after it, back.
  PrecisionFallback h(options());
  feed(h, 10.0, WeightSet::kPrimary, 0.050, 100);
  ASSERT_TRUE(h.update(10.0));
  feed(h, 10.5, WeightSet::kFallback, 0.015, 100, 1.6);
  EXPECT_FALSE(h.update(10.5));
  EXPECT_FALSE(h.update(11.9));
  EXPECT_TRUE(h.update(12.1));
  EXPECT_EQ(h.current(), WeightSet::kPrimary);
  EXPECT_EQ(h.stats().switches_to_primary, 1u);
  EXPECT_NEAR(h.stats().window_p99_s, 0.024, 0.001);  // the prediction it judged, before the window cleared
}

// The measured check: a fallback whose steps take at least as long as the primary's model predicts for them
// goes back after the dwell, whatever the latencies and the models' ratio say, and the primary stays for a
// cool-down that doubles with each consecutive decline; a fallback measured faster is kept.
void steps(PrecisionFallback& f, WeightSet set, double measured, double primary_predicted, int n) {
  for (int i = 0; i < n; ++i) f.observe_step(set, measured, primary_predicted);
}

TEST(PrecisionFallback, DeclinesAFallbackMeasuredNoFasterAndWaitsBeforeTryingAgain) {
  PrecisionFallback f(options());  // window 20 s, dwell 2 s, 50 samples
  feed(f, 1.0, WeightSet::kPrimary, 0.050, 100);
  steps(f, WeightSet::kPrimary, 0.050, 0.050, 40);  // steps on the primary are not the check's
  ASSERT_TRUE(f.update(1.0));
  // The fallback's steps take 60 ms where the primary's model predicts 50: slower, though the two models'
  // ratio (1.5) and so the latencies scaled by it say otherwise.
  feed(f, 1.5, WeightSet::kFallback, 0.060, 100, 1.5);
  steps(f, WeightSet::kFallback, 0.060, 0.050, 31);
  EXPECT_FALSE(f.update(2.9));  // within the dwell
  EXPECT_FALSE(f.update(3.0));  // 31 steps: fewer than kMinCheckSteps
  steps(f, WeightSet::kFallback, 0.060, 0.050, 1);
  steps(f, WeightSet::kFallback, 0.060, 0.0, 5);  // no prediction: not counted
  ASSERT_TRUE(f.update(3.1));
  EXPECT_EQ(f.current(), WeightSet::kPrimary);
  EXPECT_EQ(f.stats().switches_declined, 1u);
  EXPECT_EQ(f.stats().switches_to_primary, 1u);
  EXPECT_NEAR(f.stats().fallback_speedup, 0.05 / 0.06, 1e-9);
  EXPECT_DOUBLE_EQ(f.stats().cooldown_until_s, 3.1 + 20);
  // Still over the target on the primary, but cooling down: no switch until 23.1 s.
  for (double t = 4; t < 23; t += 1) {
    feed(f, t, WeightSet::kPrimary, 0.050, 10);
    EXPECT_FALSE(f.update(t)) << t;
  }
  feed(f, 23.2, WeightSet::kPrimary, 0.050, 10);
  ASSERT_TRUE(f.update(23.2));
  EXPECT_EQ(f.current(), WeightSet::kFallback);
  EXPECT_EQ(f.stats().fallback_speedup, 0);  // the check starts over
  // No faster again (equal): declined, with twice the cool-down.
  steps(f, WeightSet::kFallback, 0.050, 0.050, 40);
  ASSERT_TRUE(f.update(25.3));
  EXPECT_EQ(f.stats().switches_declined, 2u);
  EXPECT_DOUBLE_EQ(f.stats().cooldown_until_s, 25.3 + 40);

  // A faster fallback (30 ms steps where the primary would take 48) is kept while the load lasts, even with
  // its latencies above the primary's before the switch (the load grew).
  PrecisionFallback g(options());
  feed(g, 1.0, WeightSet::kPrimary, 0.050, 100);
  ASSERT_TRUE(g.update(1.0));
  for (double t = 1.5; t < 10; t += 0.5) {
    feed(g, t, WeightSet::kFallback, 0.070, 20, 1.6);
    steps(g, WeightSet::kFallback, 0.030, 0.048, 10);
    EXPECT_FALSE(g.update(t)) << t;
  }
  EXPECT_EQ(g.stats().switches_declined, 0u);
  EXPECT_NEAR(g.stats().fallback_speedup, 1.6, 1e-9);
  EXPECT_EQ(g.current(), WeightSet::kFallback);
}

// With --slo-ttft-ms: late first tokens switch to the fallback even while every inter-token latency is within its
// target (a batch controller keeps the decodes on pace while prompts queue); going back then also needs the primary's
// predicted prompt load at most kRecoverFraction. First tokens on the fallback are not judged; without the TTFT
// target they are not watched at all.
TEST(PrecisionFallback, LateFirstTokensSwitchAndThePromptLoadHoldsTheFallback) {
  FallbackOptions o = options();  // TPOT 40 ms, window 20 s, dwell 2 s, 50 samples
  o.ttft_target_s = 0.2;
  PrecisionFallback f(o);
  feed(f, 1.0, WeightSet::kPrimary, 0.030, 200);  // decodes on pace
  for (int i = 0; i < 15; ++i) f.observe_first_token(1.0, WeightSet::kPrimary, 0.5);
  EXPECT_FALSE(f.update(1.0));  // 15 first tokens: fewer than min_first_tokens, not judged yet
  f.observe_first_token(1.0, WeightSet::kPrimary, 0.5);
  EXPECT_TRUE(f.update(1.0));
  EXPECT_EQ(f.current(), WeightSet::kFallback);
  EXPECT_TRUE(f.stats().first_tokens_switched);
  EXPECT_GT(f.stats().first_token_p99_s, 0.45);
  // On the fallback: the decodes predicted well within their target on the primary (20 ms x 1.2 = 24 ms), but
  // prompts arrive faster than the primary takes them (load 1.3, then 0.85): it stays.
  for (int i = 0; i < 100; ++i) f.observe_first_token(3.0, WeightSet::kFallback, 5.0);  // not counted
  for (const double load : {1.3, 0.85}) {
    f.observe_load(load);
    feed(f, 3.5, WeightSet::kFallback, 0.020, 100, 1.2);
    EXPECT_FALSE(f.update(3.5)) << load;
    EXPECT_EQ(f.stats().first_token_count, 0);
  }
  f.observe_load(0.7);  // the burst is over
  EXPECT_TRUE(f.update(3.6));
  EXPECT_EQ(f.current(), WeightSet::kPrimary);
  // A load the engine cannot predict yet (< 0) does not hold the fallback.
  PrecisionFallback g(o);
  feed(g, 1.0, WeightSet::kPrimary, 0.050, 100);
  ASSERT_TRUE(g.update(1.0));
  EXPECT_FALSE(g.stats().first_tokens_switched);  // this one came from the TPOT
  g.observe_load(-1);
  feed(g, 3.5, WeightSet::kFallback, 0.020, 100, 1.2);
  EXPECT_TRUE(g.update(3.5));
  // Without the TTFT target, late first tokens do nothing and the load is not asked.
  PrecisionFallback h(options());
  feed(h, 1.0, WeightSet::kPrimary, 0.030, 200);
  for (int i = 0; i < 100; ++i) h.observe_first_token(1.0, WeightSet::kPrimary, 5.0);
  EXPECT_FALSE(h.update(1.0));
  EXPECT_EQ(h.stats().first_token_count, 0);
}

// predicted_prompt_load against a model taught a known linear cost: 2 ms a step, 10 us a prompt token, 50 us a
// decode (no KV or pair terms). 20 decodes cost 3 ms of a 10 ms pace, leaving 0.7; 40 prompts of 100 tokens a second
// need 4,000 x 10 us = 40 ms of each second: a load of 0.04 / 0.7.
TEST(PrecisionFallback, PromptLoadIsThePromptWorkOverWhatThePaceLeaves) {
  StepTimeModel model;
  for (int i = 0; i < 300; ++i) {
    const StepShape s{(i * 37) % 1500, (i * 11) % 64, 0, 0};
    model.update(s, 2e-3 + 10e-6 * static_cast<double>(s.prefill_tokens) + 50e-6 * static_cast<double>(s.decode_seqs));
  }
  ArrivalRates rates(5.0);
  for (int i = 0; i < 1200; ++i) rates.arrive(i * 0.025, "", 100);  // 40 req/s for 30 s
  const StepShape decodes{0, 20, 0, 0};
  const double load = predicted_prompt_load(model, rates, 30.0, decodes, 2048, 0.010, 8);
  EXPECT_NEAR(load, 40.0 * 100 * 10e-6 / 0.7, 0.06 * 0.04 / 0.7);  // the rate's EWMA reads within a few percent
  // The decodes alone overrun the pace: no prompt can be taken without slowing them.
  EXPECT_TRUE(std::isinf(predicted_prompt_load(model, rates, 30.0, StepShape{0, 200, 0, 0}, 2048, 0.010, 8)));
  // Not known before the model has learned, nor without a target; when arrivals stop, the load decays to nothing.
  EXPECT_LT(predicted_prompt_load(StepTimeModel{}, rates, 30.0, decodes, 2048, 0.010, 8), 0);
  EXPECT_LT(predicted_prompt_load(model, rates, 30.0, decodes, 2048, 0.0, 8), 0);
  EXPECT_LT(predicted_prompt_load(model, rates, 300.0, decodes, 2048, 0.010, 8), 1e-9);
}

TEST(PrecisionFallback, NoTargetNeverSwitches) {
  PrecisionFallback f(FallbackOptions{.tpot_target_s = 0, .window_s = 10, .min_samples = 1});
  feed(f, 1.0, WeightSet::kPrimary, 5.0, 1000);
  EXPECT_FALSE(f.update(1.0));
  EXPECT_EQ(f.current(), WeightSet::kPrimary);
}

TEST(PrecisionFallback, DefaultDwellIsAQuarterOfTheWindow) {
  PrecisionFallback f(FallbackOptions{.tpot_target_s = 0.04, .window_s = 60});
  EXPECT_EQ(f.options().min_dwell_s, 15);
  EXPECT_EQ(weight_set_name(WeightSet::kFallback), "fallback");
  EXPECT_EQ(weight_set_name(WeightSet::kPrimary), "primary");
}

}  // namespace
}  // namespace pagoda
