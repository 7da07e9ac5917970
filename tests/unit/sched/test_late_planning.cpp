// LatePlanning (sched/late_planning.h): when the engine plans the next step while one is in flight.
#include "pagoda/sched/late_planning.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

TEST(LatePlanning, PlansALongStepsSuccessorItsLeadBeforeItsPredictedEnd) {
  // 40 ms predicted, 5% error (2 ms), 0.5 ms to plan and launch (1 ms twice over), 1 ms margin: 36 ms after.
  const std::optional<double> after =
      LatePlanning::plan_after({.predicted_seconds = 0.040, .relative_error = 0.05, .plan_launch_seconds = 0.0005});
  ASSERT_TRUE(after.has_value());
  EXPECT_NEAR(*after, 0.040 - 0.002 - 0.001 - LatePlanning::kMarginSeconds, 1e-12);
}

TEST(LatePlanning, PlansAtOnceWhenTheWaitWouldBeShortOrNothingIsPredicted) {
  // A batch-1 decode step: 2 ms predicted leaves less than the shortest wait worth taking.
  EXPECT_FALSE(LatePlanning::plan_after({.predicted_seconds = 0.002, .relative_error = 0.02, .plan_launch_seconds = 0.0002}));
  // Just over and just under the shortest wait.
  const double lead = LatePlanning::kMarginSeconds + 2 * 0.001;
  EXPECT_TRUE(LatePlanning::plan_after({.predicted_seconds = lead + LatePlanning::kMinWaitSeconds + 1e-6,
                                        .plan_launch_seconds = 0.001}));
  EXPECT_FALSE(LatePlanning::plan_after({.predicted_seconds = lead + LatePlanning::kMinWaitSeconds - 1e-6,
                                         .plan_launch_seconds = 0.001}));
  EXPECT_FALSE(LatePlanning::plan_after({.predicted_seconds = 0}));
  EXPECT_FALSE(LatePlanning::plan_after({.predicted_seconds = -0.5}));
}

TEST(LatePlanning, AModelThatErrsALotPlansEarlier) {
  const LatePlanInputs sure{.predicted_seconds = 0.050, .relative_error = 0.01, .plan_launch_seconds = 0.001};
  LatePlanInputs unsure = sure;
  unsure.relative_error = 0.5;
  EXPECT_NEAR(*LatePlanning::plan_after(sure) - *LatePlanning::plan_after(unsure), 0.49 * 0.050, 1e-12);
  unsure.relative_error = 1.0;  // off by as much as the step: nothing left to wait
  EXPECT_FALSE(LatePlanning::plan_after(unsure));
}

TEST(PlanLaunchTime, RisesAtOnceAndFallsByATenthAStep) {
  PlanLaunchTime t;
  EXPECT_EQ(t.seconds(), 0);
  t.observe(0.001);
  EXPECT_DOUBLE_EQ(t.seconds(), 0.001);
  t.observe(0.004);  // one slow launch sets it
  EXPECT_DOUBLE_EQ(t.seconds(), 0.004);
  t.observe(0.001);
  EXPECT_NEAR(t.seconds(), 0.0037, 1e-12);
  for (int i = 0; i < 100; ++i) t.observe(0.001);
  EXPECT_NEAR(t.seconds(), 0.001, 1e-6);
  t.observe(-1);  // not a time: ignored
  EXPECT_NEAR(t.seconds(), 0.001, 1e-6);
}

}  // namespace
}  // namespace pagoda
