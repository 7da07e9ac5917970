// Async scheduling on the GPU: placeholder tokens filled on the device from the previous step's samples,
// and engine outputs equal to synchronous scheduling. The GPU's numerics depend on the batch shape, so
// the engine comparisons use request sets whose steps have the same composition in both modes (every
// request admitted at once, no preemption; stops only for requests running alone). SKIPPED without a GPU.
#include <gtest/gtest.h>

#include <random>

#include "cuda_test_util.h"
#include "pagoda/backend/cuda/cuda_ops.h"
#include "pagoda/engine/llm.h"
#include "pagoda/kernels/placeholder_tokens.h"

namespace pagoda {
namespace {

TEST(PlaceholderTokens, ReadTheMarkedRowsOfThePreviousSamples) {
  PAGODA_SKIP_WITHOUT_GPU();
  const std::vector<int32_t> ids = {5, 0, 7, 0, 0, 9};
  const std::vector<int32_t> from_prev = {-1, 2, -1, 0, 1, -1};
  const std::vector<int32_t> sampled = {100, 101, 102};
  test::DeviceArray<int32_t> d_ids(ids), d_from(from_prev), d_sampled(sampled);
  kernels::fill_placeholder_tokens(d_ids.get(), d_from.get(), d_sampled.get(), static_cast<int>(ids.size()), nullptr);
  EXPECT_EQ(d_ids.download(), (std::vector<int32_t>{5, 102, 7, 100, 101, 9}));

  // Many tokens (the grid-stride loop), every one a placeholder.
  const int n = 5000;
  std::vector<int32_t> many(n, 0), rows(n);
  for (int i = 0; i < n; ++i) rows[i] = i % 3;
  test::DeviceArray<int32_t> d_many(many), d_rows(rows);
  kernels::fill_placeholder_tokens(d_many.get(), d_rows.get(), d_sampled.get(), n, nullptr);
  const std::vector<int32_t> got = d_many.download();
  for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], 100 + i % 3) << "token " << i;
}

// A step that samples nothing ends with a marker (enqueue_sample of no rows): ready once the stream's work before it
// is done, waited for like a draw, and the two slots still take turns with draws between markers.
TEST(DeviceSampling, AStepThatSamplesNothingEndsWithAMarker) {
  PAGODA_SKIP_WITHOUT_GPU();
  CudaOps ops(CudaOpsOptions{.max_num_seqs = 4, .max_model_len = 256});
  std::vector<TokenId> none;
  const Tensor no_logits = ops.alloc(DType::kBF16, {0, 64});
  const PendingSample marker = ops.enqueue_sample(no_logits, {});
  EXPECT_EQ(marker.num_rows, 0);
  ops.synchronize();
  EXPECT_TRUE(ops.sample_ready(marker));
  ops.wait_sample(marker, none);

  // Greedy draws of one row around markers: each draw's token is the row's argmax.
  const int vocab = 64;
  std::vector<uint16_t> row(vocab, 0x3f80);  // bf16 1.0
  row[37] = 0x4000;                           // bf16 2.0: the argmax
  test::DeviceArray<uint16_t> logits(row);
  const Tensor one_row(logits.get(), DType::kBF16, {1, vocab}, Device::kCuda);
  const DeviceSamplingRow greedy{.temperature = 0.0f};
  for (int i = 0; i < 3; ++i) {
    const PendingSample m = ops.enqueue_sample(no_logits, {});
    const PendingSample draw = ops.enqueue_sample(one_row, std::span(&greedy, 1));
    ops.wait_sample(m, none);
    std::vector<TokenId> token(1, -1);
    ops.wait_sample(draw, token);
    EXPECT_EQ(token[0], 37) << "round " << i;
  }
}

std::string stories_path() { return test::test_data_dir() + "/../../models/stories260K.gguf"; }

LlmOptions gpu_options(bool async_scheduling, bool eager, int max_num_batched_tokens = 1024) {
  return LlmOptions{.load = {.model_path = stories_path(), .show_progress = false},
                    .device = "cuda",
                    .enforce_eager = eager,
                    .async_scheduling = async_scheduling,
                    .max_num_seqs = 16,
                    .max_num_batched_tokens = max_num_batched_tokens,
                    .max_model_len = 512,
                    .kv_cache_memory = int64_t{64} << 20,
                    .seed = 11};
}

std::vector<CompletionOutput> run(bool async_scheduling, bool eager, const std::vector<GenerateRequest>& requests,
                                  bool one_at_a_time = false, int max_num_batched_tokens = 1024) {
  LLM llm(gpu_options(async_scheduling, eager, max_num_batched_tokens));
  if (!one_at_a_time) return llm.generate(requests);
  std::vector<CompletionOutput> out;
  for (const GenerateRequest& r : requests) out.push_back(llm.generate({r})[0]);
  return out;
}

// Greedy and seeded requests, max_tokens 1, 2 and more, all admitted in the first step.
std::vector<GenerateRequest> batch_requests() {
  std::mt19937 rng(5);
  std::vector<GenerateRequest> requests(16);
  for (size_t i = 0; i < requests.size(); ++i) {
    GenerateRequest& r = requests[i];
    r.prompt_ids = {1};
    for (size_t j = 0; j < 4 + i * 3; ++j) r.prompt_ids.push_back(static_cast<TokenId>(3 + rng() % 500));
    r.params.ignore_eos = true;
    r.params.max_tokens = i == 0 ? 1 : i == 1 ? 2 : 10 + static_cast<int>(i) * 5;
    r.params.temperature = 0.0;
    if (i % 2 == 1) {
      r.params.temperature = 0.8;
      r.params.top_p = 0.95;
      r.params.seed = 500 + i;
    }
  }
  return requests;
}

TEST(AsyncSchedulingGpu, SameTokensAsSynchronous) {
  PAGODA_SKIP_WITHOUT_GPU();
  const std::vector<GenerateRequest> requests = batch_requests();
  for (bool eager : {false, true}) {
    SCOPED_TRACE(eager ? "eager" : "CUDA graphs");
    const std::vector<CompletionOutput> sync = run(false, eager, requests);
    const std::vector<CompletionOutput> async = run(true, eager, requests);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(async[i].output_ids, sync[i].output_ids) << "request " << i;
      EXPECT_EQ(async[i].finish_reason, sync[i].finish_reason) << "request " << i;
      EXPECT_EQ(async[i].output_ids.size(), static_cast<size_t>(requests[i].params.max_tokens)) << "request " << i;
    }
  }
}

// A request that stops on a stop token (EOS works the same way) while its next step is already planned:
// that step's token is dropped, and the outputs match. Each request runs alone.
TEST(AsyncSchedulingGpu, StopTokensMidStream) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::vector<GenerateRequest> requests = batch_requests();
  requests.resize(8);
  const std::vector<CompletionOutput> probe = run(false, false, requests, true);
  for (size_t i = 2; i < requests.size(); ++i) requests[i].params.stop_token_ids = {probe[i].output_ids[1 + i % 5]};
  const std::vector<CompletionOutput> sync = run(false, false, requests, true);
  const std::vector<CompletionOutput> async = run(true, false, requests, true);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(async[i].output_ids, sync[i].output_ids) << "request " << i;
    EXPECT_EQ(async[i].finish_reason, sync[i].finish_reason) << "request " << i;
    if (i >= 2) {
      EXPECT_EQ(sync[i].finish_reason, FinishReason::kStop) << "request " << i;
    }
  }
}

// Prompts of 100 to 300 tokens in chunks of 32, one request at a time: most steps compute a chunk and sample
// nothing, so the engine waits for their end marker (Ops::enqueue_sample with no rows) instead of a draw.
TEST(AsyncSchedulingGpu, StepsThatSampleNothingEndBeforeTheirTokensAreUsed) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::vector<GenerateRequest> requests = batch_requests();
  requests.resize(6);
  std::mt19937 rng(9);
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].prompt_ids.resize(100 + 40 * i, 1);
    for (size_t j = 1; j < requests[i].prompt_ids.size(); ++j) requests[i].prompt_ids[j] = static_cast<TokenId>(3 + rng() % 500);
    requests[i].params.max_tokens = 12;
  }
  const std::vector<CompletionOutput> sync = run(false, false, requests, true, 32);
  const std::vector<CompletionOutput> async = run(true, false, requests, true, 32);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(async[i].output_ids, sync[i].output_ids) << "request " << i;
    EXPECT_EQ(async[i].output_ids.size(), 12u) << "request " << i;
  }
}

}  // namespace
}  // namespace pagoda
