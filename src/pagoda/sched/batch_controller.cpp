// BatchController (batch_controller.h).
#include "pagoda/sched/batch_controller.h"

#include <algorithm>
#include <cmath>
#include <limits>

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
  d.token_budget = max_budget_;
  d.prefill = room;
  if (targets_.tpot_seconds <= 0 || model.snapshot().num_steps < kMinModelSteps) return d;

  const double target = targets_.tpot_seconds;
  const double decodes_alone = model.predict(shape_with(in, 0));
  double allowed = std::numeric_limits<double>::infinity();
  for (const DecodingRequest& r : in.decoding) {
    if (targets_.ttft_seconds > 0 && r.ttft_s > targets_.ttft_seconds) continue;  // its SLO is missed already
    const double allowance = target * static_cast<double>(r.intervals_done + 1) - r.elapsed_s;
    if (allowance < decodes_alone) continue;  // off its pace whatever this step takes
    allowed = std::min(allowed, allowance);
    ++d.in_time_decodes;
  }
  if (d.in_time_decodes == 0) return d;

  d.allowed_s = allowed;
  int lo = 0, hi = room;  // the largest prefill predicted within `allowed` (the prediction grows with it)
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (model.predict(shape_with(in, mid)) <= allowed) lo = mid;
    else hi = mid - 1;
  }
  d.prefill = std::max(lo, std::min(kMinPrefill, room));
  d.token_budget = static_cast<int>(decodes) + d.prefill;
  return d;
}

}  // namespace pagoda
