// Zero rows on the CUDA backend: every op, and a prompt chunk that samples nothing (before the fix,
// lm_head on zero rows aborted the process). The CPU runs the same checks (tests/unit/backend/
// test_ops_zero_rows.cpp). SKIPPED without a GPU.
#include "../backend/ops_zero_rows.h"

#include "cuda_test_util.h"
#include "pagoda/backend/cuda/cuda_ops.h"

namespace pagoda {
namespace {

const LoadedModel& loaded(const std::string& path) {
  static std::map<std::string, LoadedModel> cache;
  auto it = cache.find(path);
  if (it == cache.end()) it = cache.emplace(path, load_model(LoadOptions{.model_path = path, .show_progress = false})).first;
  return it->second;
}

class CudaOpsZeroRows : public ::testing::TestWithParam<std::string> {
 protected:
  const LoadedModel& model() const {
    return loaded(GetParam() == "stories260K" ? testing::bundled_model_path() : testing::data_path("models/" + GetParam()));
  }
};

TEST_P(CudaOpsZeroRows, EveryOpAcceptsZeroRows) {
  PAGODA_SKIP_WITHOUT_GPU();
  CudaOps ops(CudaOpsOptions{.max_num_seqs = 8, .max_model_len = 256});
  testing::expect_every_op_accepts_zero_rows(ops, model());
}

// Eager and through run_step's staging, with graphs allowed (a prompt chunk never replays one).
TEST_P(CudaOpsZeroRows, AStepWithoutLogitsRowsFeedsTheNext) {
  PAGODA_SKIP_WITHOUT_GPU();
  for (bool eager : {true, false}) {
    CudaOps ops(CudaOpsOptions{.max_num_seqs = 8, .max_model_len = 256, .enforce_eager = eager});
    testing::expect_a_step_without_logits_rows_feeds_the_next(ops, model(), 0.03);
  }
}

// stories260K: head_dim 8 (the generic attention kernel); tiny-llama3-hf: head_dim 16; tiny-mistral: 16, untied.
INSTANTIATE_TEST_SUITE_P(Models, CudaOpsZeroRows, ::testing::Values("stories260K", "tiny-llama3-hf", "tiny-mistral-spm-hf"));

}  // namespace
}  // namespace pagoda
