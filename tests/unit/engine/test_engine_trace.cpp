// The engine's timing record: every event carries when it was emitted and the request's times so far
// (queued <= scheduled <= prefill done <= each token), and the step observer sees every step with its
// batch composition (prefill tokens vs decode sequences; eager on the CPU).
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "../model/golden_helpers.h"
#include "pagoda/engine/llm.h"

namespace pagoda {
namespace {

TEST(EngineTrace, EventTimesAndStepRecords) {
  LLM llm(LlmOptions{.load = {.model_path = testing::bundled_model_path(), .show_progress = false}, .max_num_seqs = 8});
  std::mutex mutex;
  std::vector<StepRecord> steps;
  llm.engine().set_step_observer([&](const StepRecord& s) {
    std::lock_guard lock(mutex);
    steps.push_back(s);
  });
  std::vector<RequestEvent> events;
  std::vector<GenerateRequest> requests(3);
  for (int i = 0; i < 3; ++i) {
    requests[i].prompt_ids = {1, 403, 407, static_cast<TokenId>(410 + i), 300, 301};
    requests[i].params.temperature = 0;
    requests[i].params.ignore_eos = true;
    requests[i].params.max_tokens = 5;
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<CompletionOutput> outs = llm.generate(requests);
  // Events again, one request, to look at each (generate() folds them).
  GenerateRequest one = requests[0];
  std::mutex done_mutex;
  std::condition_variable done_cv;
  bool done = false;
  llm.engine().submit(one, [&](const RequestEvent& e) {
    std::lock_guard lock(done_mutex);
    events.push_back(e);
    if (e.finished) {
      done = true;
      done_cv.notify_all();
    }
  });
  {
    std::unique_lock lock(done_mutex);
    done_cv.wait(lock, [&] { return done; });
  }
  // The observer runs after the step's events: wait for it to have seen every step counted so far.
  for (int i = 0; i < 1000; ++i) {
    {
      std::lock_guard lock(mutex);
      if (steps.size() == llm.engine().stats().num_steps) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  llm.engine().set_step_observer({});
  ASSERT_EQ(outs.size(), 3u);

  ASSERT_EQ(events.size(), 5u);  // one token per step
  const RequestTimes& first = events.front().times;
  EXPECT_GE(first.queued, start);
  EXPECT_GE(first.scheduled, first.queued);
  EXPECT_GE(first.prefill_done, first.scheduled);
  EXPECT_EQ(events.front().time, first.prefill_done);  // the first token comes out of the prefill step
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_GE(events[i].time, events[i - 1].time);
    EXPECT_EQ(events[i].times.prefill_done, first.prefill_done);
    EXPECT_EQ(events[i].times.queued, first.queued);
  }
  EXPECT_TRUE(events.back().finished);
  EXPECT_EQ(events.back().times.num_preemptions, 0);

  std::lock_guard lock(mutex);
  ASSERT_GE(steps.size(), 10u);  // 3 requests x 5 tokens, batched, then 5 for the last one
  int prefill = 0, decode = 0;
  for (const StepRecord& s : steps) {
    EXPECT_GT(s.num_seqs, 0);
    EXPECT_EQ(s.graph_batch_size, 0);  // the CPU runs eagerly
    EXPECT_GE(s.total_seconds, s.execute_seconds);
    EXPECT_GT(s.execute_seconds, 0);
    EXPECT_LE(s.decode_seqs, s.num_seqs);
    prefill += s.prefill_tokens;
    decode += s.decode_seqs;
  }
  EXPECT_EQ(prefill, 4 * 6);  // every prompt once (6 tokens: no whole block to share from the prefix cache)
  EXPECT_EQ(decode, 4 * 4);       // four decode tokens after each request's first
  const EngineStats stats = llm.engine().stats();
  EXPECT_EQ(stats.num_steps, steps.size());
  EXPECT_GT(stats.execute_seconds, 0);
  EXPECT_EQ(stats.last_step.num_seqs, steps.back().num_seqs);
}

}  // namespace
}  // namespace pagoda
