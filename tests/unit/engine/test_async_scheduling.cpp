// Async scheduling on the CPU: planning each step while the previous one is in flight gives exactly the
// synchronous outputs (token ids and finish reasons) for a mixed batch: greedy and seeded sampling,
// EOS and stop tokens mid-stream (the step planned ahead is thrown away), max_tokens 1 and 2,
// preemption on a tiny KV pool, prefix caching; also with requests that force synchronous steps
// (penalties, logprobs) coming and going, and with a cancellation while a step is in flight.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <random>

#include "../model/golden_helpers.h"
#include "pagoda/core/memory_size.h"
#include "pagoda/engine/llm.h"

namespace pagoda {
namespace {

struct Model {
  std::string path;
  std::string kv_cache_memory;  // small: forces preemption with 16 running sequences
  int max_model_len = 512;      // at most what the pool holds (the engine refuses a pool smaller than one sequence)
};

Model stories() { return {testing::bundled_model_path(), "400KiB", 320}; }
Model tiny_llama3() { return {testing::data_path("models/tiny-llama3-hf"), "320KiB"}; }

LlmOptions options(const Model& m, bool async_scheduling) {
  return LlmOptions{.load = {.model_path = m.path, .show_progress = false},
                    .async_scheduling = async_scheduling,
                    .max_num_seqs = 16,
                    .max_num_batched_tokens = 48,
                    .max_model_len = m.max_model_len,
                    .kv_cache_memory = parse_memory_size(m.kv_cache_memory),
                    .seed = 7};
}

// Runs the requests and records whether any step was launched while another was in flight.
struct Run {
  std::vector<CompletionOutput> outputs;
  EngineStats stats;
  int num_overlapped_steps = 0;
};

Run generate(const Model& m, bool async_scheduling, const std::vector<GenerateRequest>& requests) {
  LLM llm(options(m, async_scheduling));
  std::mutex mutex;
  Run run;
  llm.engine().set_step_observer([&](const StepRecord& s) {
    std::lock_guard lock(mutex);
    run.num_overlapped_steps += s.overlapped ? 1 : 0;
  });
  run.outputs = llm.generate(requests);
  llm.engine().set_step_observer({});
  run.stats = llm.engine().stats();
  return run;
}

// 64 requests over shared prefixes: greedy, seeded sampling (EOS allowed), stop tokens that occur
// mid-stream, max_tokens 1 and 2. `stop_source` gives each request a stop token from its greedy output.
std::vector<GenerateRequest> mixed_requests(const Model& m, bool with_synchronous_requests) {
  std::mt19937 rng(99);
  std::uniform_int_distribution<TokenId> token(3, 500);
  std::vector<TokenId> shared(40);
  for (TokenId& t : shared) t = token(rng);
  std::vector<GenerateRequest> requests(64);
  for (size_t i = 0; i < requests.size(); ++i) {
    GenerateRequest& r = requests[i];
    r.prompt_ids = i % 3 == 0 ? std::vector<TokenId>{1} : shared;
    r.prompt_ids.resize(r.prompt_ids.size() + 1 + rng() % 50);
    for (size_t j = i % 3 == 0 ? 1 : shared.size(); j < r.prompt_ids.size(); ++j) r.prompt_ids[j] = token(rng);
    r.params.max_tokens = i % 8 == 0 ? 1 : i % 8 == 4 ? 2 : 4 + static_cast<int>(rng() % 40);
    r.params.temperature = 0.0;
    if (i % 2 == 1) {  // seeded sampling, stopping on EOS when the model draws it
      r.params.temperature = 0.6 + 0.1 * (i % 5);
      r.params.seed = 1000 + i;
      r.params.top_k = i % 3 == 0 ? 30 : 0;
      r.params.top_p = i % 5 == 0 ? 0.9 : 1.0;
    } else {
      r.params.ignore_eos = true;
    }
    if (with_synchronous_requests && i % 16 == 5) r.params.presence_penalty = 0.5;
    if (with_synchronous_requests && i % 16 == 11) r.params.logprobs = 2;
  }
  // Stop tokens that cut generation short: for every fourth request, a token from the middle of its
  // synchronous output.
  std::vector<GenerateRequest> probes;
  std::vector<size_t> probed;
  for (size_t i = 2; i < requests.size(); i += 4) {
    if (requests[i].params.max_tokens < 6) continue;
    probes.push_back(requests[i]);
    probed.push_back(i);
  }
  const std::vector<CompletionOutput> probe_out = generate(m, false, probes).outputs;
  for (size_t k = 0; k < probed.size(); ++k) {
    const std::vector<TokenId>& out = probe_out[k].output_ids;
    requests[probed[k]].params.stop_token_ids = {out[1 + k % (out.size() - 2)]};
  }
  return requests;
}

void expect_same_outputs(const Model& m, bool with_synchronous_requests) {
  const std::vector<GenerateRequest> requests = mixed_requests(m, with_synchronous_requests);
  const Run sync = generate(m, false, requests);
  const Run async = generate(m, true, requests);
  int num_stopped = 0, num_cut_short = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(async.outputs[i].output_ids, sync.outputs[i].output_ids) << "request " << i;
    EXPECT_EQ(async.outputs[i].finish_reason, sync.outputs[i].finish_reason) << "request " << i;
    EXPECT_EQ(async.outputs[i].usage.completion_tokens, sync.outputs[i].usage.completion_tokens) << "request " << i;
    EXPECT_EQ(async.outputs[i].logprobs.size(), sync.outputs[i].logprobs.size()) << "request " << i;
    num_stopped += sync.outputs[i].finish_reason == FinishReason::kStop;
    num_cut_short += static_cast<int>(sync.outputs[i].output_ids.size()) < requests[i].params.max_tokens;
  }
  EXPECT_GE(num_stopped, 8) << "stop tokens were meant to end requests mid-stream";
  EXPECT_GE(num_cut_short, 8);
  EXPECT_EQ(sync.num_overlapped_steps, 0);
  // Requests that need synchronous steps keep the engine from planning ahead while they run.
  const uint64_t min_overlapped = with_synchronous_requests ? 5 : async.stats.num_steps / 2;
  EXPECT_GE(static_cast<uint64_t>(async.num_overlapped_steps), min_overlapped)
      << "of " << async.stats.num_steps << " steps";
  if (with_synchronous_requests) {
    EXPECT_LT(static_cast<uint64_t>(async.num_overlapped_steps), async.stats.num_steps * 9 / 10) << "no step was drained";
  }
  for (const Run* run : {&sync, &async}) {
    EXPECT_GT(run->stats.num_preemptions, 0u) << "the KV pool was meant to force preemption";
    EXPECT_GT(run->stats.prefix_cache_hits, 0u);
    EXPECT_EQ(run->stats.num_running, 0);
    EXPECT_EQ(run->stats.kv_cache_usage, 0.0) << "leaked blocks";
  }
}

TEST(AsyncScheduling, SameOutputsAsSynchronousStories) { expect_same_outputs(stories(), false); }
TEST(AsyncScheduling, SameOutputsAsSynchronousTinyLlama3) { expect_same_outputs(tiny_llama3(), false); }
// Penalties and logprobs need every earlier token on the host: while such a request is admitted the
// engine drains the step in flight and runs synchronously, then overlaps again.
TEST(AsyncScheduling, SameOutputsWithRequestsThatNeedSynchronousSteps) { expect_same_outputs(stories(), true); }

// A request cancelled while its steps are in flight ends with "abort" and frees its blocks; the other
// request is not disturbed.
TEST(AsyncScheduling, CancelWhileAStepIsInFlight) {
  GenerateRequest victim, other;
  victim.prompt_ids = {1, 403, 407, 261};
  victim.params.temperature = 0.0;
  victim.params.ignore_eos = true;
  victim.params.max_tokens = 400;
  other = victim;
  other.prompt_ids = {1, 403, 407};
  other.params.max_tokens = 60;
  const Model roomy{testing::bundled_model_path(), "4MiB"};
  const std::vector<TokenId> expected = generate(roomy, false, {other}).outputs[0].output_ids;

  LLM llm(options(roomy, true));
  std::mutex mutex;
  std::condition_variable cv;
  int num_victim_tokens = 0;
  FinishReason victim_reason = FinishReason::kNone;
  CompletionOutput other_out;
  bool other_done = false;
  const RequestId id = llm.engine().submit(victim, [&](const RequestEvent& e) {
    std::lock_guard lock(mutex);
    num_victim_tokens += static_cast<int>(e.new_token_ids.size());
    if (e.finished) victim_reason = e.finish_reason;
    cv.notify_all();
  });
  llm.engine().submit(other, [&](const RequestEvent& e) {
    std::lock_guard lock(mutex);
    append_event(other_out, e);
    other_done = e.finished;
    cv.notify_all();
  });
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return num_victim_tokens >= 5 || victim_reason != FinishReason::kNone; }));
  }
  llm.engine().cancel(id);
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return victim_reason != FinishReason::kNone && other_done; }));
  }
  EXPECT_EQ(victim_reason, FinishReason::kAborted);
  EXPECT_LT(num_victim_tokens, 400);
  EXPECT_EQ(other_out.output_ids, expected);
  EXPECT_EQ(other_out.finish_reason, FinishReason::kLength);
  const EngineStats stats = llm.engine().stats();
  EXPECT_EQ(stats.num_running, 0);
  EXPECT_EQ(stats.num_waiting, 0);
  EXPECT_EQ(stats.kv_cache_usage, 0.0);
}

}  // namespace
}  // namespace pagoda
