// StepTimeModel (sched/step_time_model.h): recursive least squares recovers the terms of a known cost model
// from noisy steps, follows it when the cost changes, stays finite when a term never varies, and scores its
// own predictions.
#include "pagoda/sched/step_time_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace pagoda {
namespace {

struct Truth {
  double base, per_prefill, per_decode, per_kv, per_pair;
  double seconds(const StepShape& s) const {
    return base + per_prefill * s.prefill_tokens + per_decode * s.decode_seqs + per_kv * s.decode_kv_tokens +
           per_pair * s.prefill_pairs;
  }
};

// Steps as an engine makes them: some prefill chunks, some decodes with contexts of a few thousand.
StepShape random_step(std::mt19937& rng) {
  StepShape s;
  std::uniform_int_distribution<int> kind(0, 2), chunk(1, 2048), decodes(1, 64), context(16, 32768);
  const int k = kind(rng);
  if (k != 1) {  // a prompt chunk after some context
    s.prefill_tokens = chunk(rng);
    const int64_t before = context(rng) / 4;
    s.prefill_pairs = s.prefill_tokens * before + s.prefill_tokens * (s.prefill_tokens + 1) / 2;
  }
  if (k != 0) {
    s.decode_seqs = decodes(rng);
    for (int i = 0; i < s.decode_seqs; ++i) s.decode_kv_tokens += context(rng);
  }
  return s;
}

// Every term within `tol` of the truth, or (with `minor_tol`) the decode and prefill-pair terms, which add
// a few percent of a step, within that looser bound.
void expect_close(const StepTimeModel::Snapshot& got, const Truth& t, double tol, double minor_tol = 0) {
  const double want[] = {t.base, t.per_prefill, t.per_decode, t.per_kv, t.per_pair};
  for (int i = 0; i < StepTimeModel::kTerms; ++i) {
    const double bound = (minor_tol > 0 && (i == 2 || i == 4)) ? minor_tol : tol;
    EXPECT_NEAR(got.seconds_per_unit[i], want[i], bound * std::fabs(want[i])) << "term " << i;
  }
}

TEST(StepTimeModel, RecoversTheTermsOfNoisySteps) {
  const Truth t{2e-3, 20e-6, 50e-6, 30e-9, 1e-10};
  StepTimeModel model;
  EXPECT_EQ(model.predict(StepShape{.prefill_tokens = 10}), 0.0) << "nothing learned yet";
  std::mt19937 rng(1);
  std::normal_distribution<double> noise(0.0, 0.02);
  for (int i = 0; i < 2000; ++i) {
    const StepShape s = random_step(rng);
    model.update(s, t.seconds(s) * (1 + noise(rng)));
  }
  // With 2% noise and about 200 steps remembered, the terms that make most of a step come out within 10%,
  // the small ones within 50%; predictions within 3%.
  const StepTimeModel::Snapshot snap = model.snapshot();
  expect_close(snap, t, 0.1, 0.5);
  EXPECT_EQ(snap.num_steps, 2000);
  EXPECT_LT(snap.relative_error, 0.05) << "2% noise";
  const StepShape probe{.prefill_tokens = 512, .decode_seqs = 8, .decode_kv_tokens = 8000, .prefill_pairs = 200000};
  EXPECT_NEAR(model.predict(probe), t.seconds(probe), 0.03 * t.seconds(probe));
}

TEST(StepTimeModel, FollowsACostThatChanges) {
  const Truth before{2e-3, 20e-6, 50e-6, 30e-9, 1e-10}, after{4e-3, 40e-6, 50e-6, 60e-9, 1e-10};
  StepTimeModel model;
  std::mt19937 rng(2);
  for (int i = 0; i < 1000; ++i) {
    const StepShape s = random_step(rng);
    model.update(s, before.seconds(s));
  }
  for (int i = 0; i < 1500; ++i) {  // the backend slowed down (another tenant on the GPU, say)
    const StepShape s = random_step(rng);
    model.update(s, after.seconds(s));
  }
  expect_close(model.snapshot(), after, 0.05);
}

TEST(StepTimeModel, StaysFiniteWhenTermsNeverVary) {
  // Batch-1 decode at one context for a long time: only the base term is excited.
  StepTimeModel model;
  const StepShape s{.decode_seqs = 1, .decode_kv_tokens = 300};
  for (int i = 0; i < 100000; ++i) model.update(s, 4e-3);
  EXPECT_NEAR(model.predict(s), 4e-3, 1e-6);
  for (double v : model.snapshot().seconds_per_unit) EXPECT_TRUE(std::isfinite(v));
  // Then the load changes: it still learns.
  std::mt19937 rng(3);
  const Truth t{2e-3, 20e-6, 50e-6, 30e-9, 1e-10};
  for (int i = 0; i < 2000; ++i) {
    const StepShape r = random_step(rng);
    model.update(r, t.seconds(r));
  }
  expect_close(model.snapshot(), t, 0.1);
}

TEST(StepTimeModel, IgnoresStepsWithoutATime) {
  StepTimeModel model;
  model.update(StepShape{.prefill_tokens = 4}, 0.0);
  model.update(StepShape{.prefill_tokens = 4}, NAN);
  EXPECT_EQ(model.snapshot().num_steps, 0);
}

}  // namespace
}  // namespace pagoda
