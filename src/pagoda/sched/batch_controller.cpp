// BatchController (batch_controller.h).
#include "pagoda/sched/batch_controller.h"

#include <algorithm>
#include <cmath>

namespace pagoda {
namespace {

// A step with `prefill` prompt tokens beside this step's decodes; the chunk's attention pairs as a fresh
// prompt's (p^2 / 2), the common case and an upper bound for a chunk with little context before it.
StepShape shape_with(const ControllerInputs& in, int64_t prefill) {
  return StepShape{prefill, in.decode_seqs, in.decode_kv_tokens, prefill * (prefill + 1) / 2};
}

}  // namespace

ControllerDecision BatchController::decide(const StepTimeModel& model, const ControllerInputs& in) const {
  ControllerDecision d;
  const int64_t decodes = std::min<int64_t>(in.decode_seqs, max_budget_);
  const int room = static_cast<int>(max_budget_ - decodes);  // prompt tokens the static budget would allow
  if (targets_.tpot_seconds <= 0 || model.snapshot().num_steps < kMinModelSteps) {
    d.token_budget = max_budget_;
    d.p_tpot = d.p_rate = d.p_ttft = room;
    return d;
  }
  const double tpot = targets_.tpot_seconds;
  // p_tpot: the largest prefill within the target (the prediction grows with the prefill: binary search).
  int lo = 0, hi = room;
  if (model.predict(shape_with(in, 0)) > tpot) {
    hi = 0;
  } else {
    while (lo < hi) {
      const int mid = lo + (hi - lo + 1) / 2;
      if (model.predict(shape_with(in, mid)) <= tpot) lo = mid;
      else hi = mid - 1;
    }
  }
  d.p_tpot = lo;
  d.p_rate = static_cast<int>(std::min<double>(room, std::ceil(in.arrival_rate * in.mean_prompt_tokens * tpot)));
  if (targets_.ttft_seconds > 0) {
    double ahead = 0, need = 0;  // prompt tokens served before and with this one; the largest rate asked
    for (const PendingPrompt& p : in.pending) {
      ahead += static_cast<double>(p.tokens);
      const double left = targets_.ttft_seconds - p.wait_s;
      if (left <= 0) continue;  // already late: its tokens are ahead of the others, it asks for nothing
      const double steps = std::floor(left / tpot);
      need = std::max(need, steps < 1 ? ahead : std::ceil(ahead / steps));
    }
    d.p_ttft = static_cast<int>(std::min<double>(room, need));
  }
  const int prefill = std::clamp(std::max({d.p_tpot, d.p_rate, d.p_ttft}), std::min(kMinPrefill, room), room);
  d.token_budget = static_cast<int>(decodes) + prefill;
  return d;
}

}  // namespace pagoda
