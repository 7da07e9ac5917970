// The engine's latency targets (--slo-ttft-ms, --slo-tpot-ms): the adaptive batch controller keeps them
// (batch_controller.h), the slo scheduling policy does not preempt a request that has already missed them
// (policy.h).
#pragma once

namespace pagoda {

struct SloTargets {
  double ttft_seconds = 0;  // 0: none
  double tpot_seconds = 0;  // 0: none (then the controller keeps the static budget)
};

}  // namespace pagoda
