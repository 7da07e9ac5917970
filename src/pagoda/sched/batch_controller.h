// The SLO-aware batch controller (issue 17, `--batch-controller adaptive`): each step's token budget, chosen
// from the learned step-time model so that running requests keep their time per output token while waiting
// prompts reach their first token in time. The rule, in full (docs/ARCHITECTURE.md repeats it):
//
//   budget = decodes + clamp(max(p_tpot, p_rate, p_ttft), min_prefill, max_budget - decodes)
//
//   p_tpot  the most prompt tokens a step can take and still be predicted within --slo-tpot-ms, with this
//           step's decodes (their number and the KV they read) and the chunk's own attention;
//   p_rate  prompt tokens arriving per TPOT interval (the arrival-rate EWMA times the mean prompt length
//           times the target): taking fewer lets the queue grow without bound;
//   p_ttft  for each waiting prompt that can still make --slo-ttft-ms, in the order they are served: the
//           prompt tokens up to and including it, divided by the steps left before its deadline (a step
//           taking about the TPOT target; all of them when under one step is left); the largest of these.
//           Prompts already past their deadline are counted as work ahead of others but ask for nothing
//           themselves: under overload, serving them sooner only costs the running requests their TPOT;
//   min_prefill (16) keeps prompts moving when the decodes alone exceed the target.
//
// Without a TPOT target the budget is the static --max-num-batched-tokens; so it is until the model has
// learned from a few steps. The rule reads only this step's state, so it reacts to a change of load in the
// step after it, and a steady load gives a steady budget.
#pragma once

#include <cstdint>
#include <vector>

#include "pagoda/sched/slo_targets.h"
#include "pagoda/sched/step_time_model.h"

namespace pagoda {

// A request whose prompt is not all computed yet: its tokens left and how long it has waited.
struct PendingPrompt {
  int64_t tokens = 0;
  double wait_s = 0;
};

// What the controller sees of the engine this step.
struct ControllerInputs {
  int64_t decode_seqs = 0;             // running sequences computing one token this step
  int64_t decode_kv_tokens = 0;        // the KV their attention reads
  std::vector<PendingPrompt> pending;  // prompts not all computed, in the order they are served
  double arrival_rate = 0;             // requests per second (EWMA)
  double mean_prompt_tokens = 0;       // of recent arrivals (EWMA)
};

struct ControllerDecision {
  int token_budget = 0;   // what the scheduler may compute this step
  int p_tpot = 0, p_rate = 0, p_ttft = 0;  // the three candidates, for /metrics and tests
};

class BatchController {
 public:
  static constexpr int kMinPrefill = 16;
  static constexpr int64_t kMinModelSteps = 8;  // steps the model learns from before it is trusted

  BatchController(SloTargets targets, int max_budget) : targets_(targets), max_budget_(max_budget) {}

  ControllerDecision decide(const StepTimeModel& model, const ControllerInputs& in) const;

 private:
  SloTargets targets_;
  int max_budget_;
};

}  // namespace pagoda
