// The SLO-aware batch controller (issue 17, `--batch-controller adaptive`): each step's token budget, chosen
// from the learned step-time model so that the running requests that can still meet their SLOs keep their
// time per output token (TPOT) within the target, and every prompt token beyond that is computed at once. The
// rule, in full (docs/ARCHITECTURE.md repeats it):
//
//   budget  = decodes + clamp(p, min(min_prefill, room), room),   room = max_budget - decodes
//   p       = the most prompt tokens whose step the model predicts within `allowed` (room when nothing limits it)
//   allowed = min over the in-time decodes i of   target x (done_i + 1) - elapsed_i
//
// A request's TPOT, as clients measure it, is the time from its first token to its last over the intervals
// between them. After done_i intervals in elapsed_i seconds, this step keeps it on the target's pace if it takes
// at most its allowance: the target, plus what the request is ahead of its pace (less, when behind). So a step
// may be long when every running request has time in hand, and each step is within the target when one has
// just started. (Counting on later steps being faster than the target, to allow more now, let the steps run
// long: on an H100 the TPOT of requests sent at 32 req/s averaged 39.8 ms at a 45 ms target.) The in-time
// decodes are those whose first token came within the TTFT target (the others miss their SLO whatever this step
// does) and whose allowance is at least a step of the decodes alone (one that cannot keep its pace even so does
// not hold the others back). With none of them (nothing decoding, or all late), the step takes the whole room:
// a prompt token computed now never delays a first token.
//
// min_prefill (16) keeps prompts moving when the decodes alone exceed the allowance. Without a TPOT target the
// budget is the static --max-num-batched-tokens; so it is until the model has learned from a few steps. The
// rule reads only this step's state, so it follows a change of load at the next step, and a steady load gives
// a steady budget. Which prompts fill the budget is the scheduling policy's choice: with `--scheduling-policy
// slo` (deadline-first admission) the ones that can still make their first token in time go first.
#pragma once

#include <cstdint>
#include <vector>

#include "pagoda/sched/slo_targets.h"
#include "pagoda/sched/step_time_model.h"

namespace pagoda {

// A running request past its first token: how its TPOT stands.
struct DecodingRequest {
  double elapsed_s = 0;       // since its first token
  int64_t intervals_done = 0; // output tokens so far, less the first
  double ttft_s = 0;          // how long its first token took
};

// What the controller sees of the engine this step.
struct ControllerInputs {
  int64_t decode_seqs = 0;                // running sequences computing one token this step
  int64_t decode_kv_tokens = 0;           // the KV their attention reads
  std::vector<DecodingRequest> decoding;  // those of them past their first token (the others are prompts' last chunks)
};

struct ControllerDecision {
  int token_budget = 0;            // what the scheduler may compute this step
  int prefill = 0;                 // the prompt tokens of it
  double allowed_s = 0;            // the step time the in-time decodes allow (0: nothing limits it)
  int64_t in_time_decodes = 0;     // how many decodes set that allowance
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
