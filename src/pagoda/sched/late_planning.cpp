// Late planning's rule (late_planning.h).
#include "pagoda/sched/late_planning.h"

#include <algorithm>

namespace pagoda {

std::optional<double> LatePlanning::plan_after(const LatePlanInputs& in) {
  if (!(in.predicted_seconds > 0)) return std::nullopt;
  const double lead = kMarginSeconds + 2 * std::max(in.plan_launch_seconds, 0.0) +
                      std::max(in.relative_error, 0.0) * in.predicted_seconds;
  const double wait = in.predicted_seconds - lead;
  if (!(wait >= kMinWaitSeconds)) return std::nullopt;
  return wait;
}

void PlanLaunchTime::observe(double seconds) {
  if (!(seconds >= 0)) return;
  constexpr double kWeight = 0.1;
  seconds_ = seen_ ? std::max(seconds, (1 - kWeight) * seconds_ + kWeight * seconds) : seconds;
  seen_ = true;
}

}  // namespace pagoda
