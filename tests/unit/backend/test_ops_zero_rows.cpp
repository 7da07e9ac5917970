// Zero rows on the CPU backend (the same checks run on CUDA in tests/unit/cuda/test_ops_zero_rows_gpu.cpp).
#include "ops_zero_rows.h"

#include "pagoda/backend/cpu/cpu_ops.h"

namespace pagoda {
namespace {

const LoadedModel& stories() {
  static const LoadedModel m = load_model(LoadOptions{.model_path = testing::bundled_model_path(), .show_progress = false});
  return m;
}

TEST(CpuOpsZeroRows, EveryOpAcceptsZeroRows) {
  CpuOps ops;
  testing::expect_every_op_accepts_zero_rows(ops, stories());
}

TEST(CpuOpsZeroRows, AStepWithoutLogitsRowsFeedsTheNext) {
  CpuOps ops;
  testing::expect_a_step_without_logits_rows_feeds_the_next(ops, stories(), 1e-5);
}

}  // namespace
}  // namespace pagoda
