// Replays probe 55's flood (replay_input.txt, from step_trace.py: step, plan+launch ms, ran ms, decodes, prompt tokens,
// prefill pairs) through the project's StepTimeModel and LatePlanning rule, with the plan-and-launch time as committed
// (PlanLaunchTime: up at once, down by a tenth a step) and as a plain moving average, and counts the steps whose
// successor the rule would plan late. Decode KV tokens are not in the trace: 1,150 a decode (the prompts' length).
//   g++ -std=c++20 -O1 -Isrc bench/results/2026-12-07-session43/replay_late_planning.cpp src/pagoda/sched/step_time_model.cpp \
//     src/pagoda/sched/late_planning.cpp -o /tmp/replay && /tmp/replay < bench/results/2026-12-07-session43/replay_input.txt
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "pagoda/sched/late_planning.h"
#include "pagoda/sched/step_time_model.h"

using namespace pagoda;

int main() {
  StepTimeModel model;
  PlanLaunchTime committed;
  double average = 0;
  bool seen = false;
  int steps = 0, late_committed = 0, late_average = 0;
  double error_sum = 0;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    long step, decodes, prompt, pairs;
    double plan_launch_ms, ran_ms;
    in >> step >> plan_launch_ms >> ran_ms >> decodes >> prompt >> pairs;
    const StepShape shape{prompt, decodes, decodes * 1150, pairs};
    const StepTimeModel::Snapshot snap = model.snapshot();
    if (snap.num_steps >= 8) {  // BatchController::kMinModelSteps, as the engine asks
      ++steps;
      const double predicted = model.predict(shape);
      late_committed += LatePlanning::plan_after({predicted, snap.relative_error, committed.seconds()}).has_value();
      late_average += LatePlanning::plan_after({predicted, snap.relative_error, average}).has_value();
    }
    model.update(shape, ran_ms * 1e-3);
    error_sum += model.snapshot().relative_error;
    committed.observe(plan_launch_ms * 1e-3);
    average = seen ? 0.9 * average + 0.1 * plan_launch_ms * 1e-3 : plan_launch_ms * 1e-3;
    seen = true;
  }
  std::printf("%d steps: planned late with the committed plan-and-launch time %d (%.0f%%), with a plain moving average %d "
              "(%.0f%%); the model's mean relative error %.3f\n", steps, late_committed, 100.0 * late_committed / steps,
              late_average, 100.0 * late_average / steps, error_sum / steps);
}
