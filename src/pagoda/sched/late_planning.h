// Late planning: when, under async scheduling, the engine plans the next step.
//
// Async scheduling plans step N+1 while step N runs on the device, so the GPU never waits for the CPU. Planned
// as soon as N is launched, N+1 is fixed a whole step before it starts: a request that arrives during N waits
// for N+1 and then for its own step N+2. Under prompt-heavy load, where steps take tens of milliseconds, that
// is a whole step more of time to first token for every new request. Instead the engine waits until N is
// predicted to end in `lead` (the step-time model's prediction less the time planning and launching take,
// twice over, and the model's recent relative error), then plans: a request that arrives during N joins N+1.
// Steps shorter than kMinWaitSeconds of wait are planned at once (nothing to gain, and a wrong prediction
// would leave the GPU idle).
#pragma once

#include <optional>

namespace pagoda {

struct LatePlanInputs {
  double predicted_seconds = 0;     // the step-time model's prediction for the step in flight
  double relative_error = 0;        // the model's moving |predicted - measured| / measured
  double plan_launch_seconds = 0;   // recent time from planning a step to its launch returning
};

struct LatePlanning {
  static constexpr double kMarginSeconds = 0.001;   // added to the lead (thread wake-up, jitter)
  static constexpr double kMinWaitSeconds = 0.003;  // waits shorter than this are not taken

  // Seconds after the step in flight started on the device at which to plan the next one; nullopt: at once.
  static std::optional<double> plan_after(const LatePlanInputs& in);
};

// The engine's recent plan-and-launch time (LatePlanInputs::plan_launch_seconds): up at once to a longer one,
// down by a tenth of the difference a step, so that one slow launch (an eager prompt step) sets the lead for a while.
class PlanLaunchTime {
 public:
  void observe(double seconds);
  double seconds() const { return seconds_; }

 private:
  double seconds_ = 0;
  bool seen_ = false;
};

}  // namespace pagoda
