// The TTL batching window through the engine (--batch-wait-ms): a request arriving while the engine is idle
// waits for the next one, within the window, and both are prefilled in one step; the engine sleeps while it
// holds them (a few plans, not a spin); without the window the first request starts alone.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "../model/golden_helpers.h"
#include "pagoda/engine/llm.h"

namespace pagoda {
namespace {

struct WindowRun {
  std::vector<StepRecord> steps;
  uint64_t holds = 0;
  double first_queue_seconds = 0;
};

// Two requests 30 ms apart into an idle engine.
WindowRun two_requests(double batch_wait_ms) {
  LLM llm(LlmOptions{.load = {.model_path = testing::bundled_model_path(), .show_progress = false},
                     .max_num_seqs = 8, .batch_wait_ms = batch_wait_ms});
  std::mutex mutex;
  std::condition_variable cv;
  WindowRun run;
  int finished = 0;
  RequestId first = 0;
  llm.engine().set_step_observer([&](const StepRecord& s) {
    std::lock_guard lock(mutex);
    run.steps.push_back(s);
    cv.notify_all();
  });
  const auto on_event = [&](const RequestEvent& e) {
    std::lock_guard lock(mutex);
    if (e.finished) {
      if (e.request_id == first) run.first_queue_seconds = std::chrono::duration<double>(e.times.scheduled - e.times.queued).count();
      ++finished;
      cv.notify_all();
    }
  };
  for (int i = 0; i < 2; ++i) {
    GenerateRequest r;
    r.prompt_ids = {1, 403, 407, static_cast<TokenId>(410 + i), 300, 301};
    r.params.temperature = 0;
    r.params.ignore_eos = true;
    r.params.max_tokens = 3;
    {
      std::lock_guard lock(mutex);  // the engine may finish it before submit() returns
      const RequestId id = llm.engine().submit(r, on_event);
      if (i == 0) first = id;
    }
    if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  // The observer hears of a step after its events and the published stats may lag it: poll, with a bound.
  std::unique_lock lock(mutex);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!(finished == 2 && run.steps.size() == llm.engine().stats().num_steps) &&
         std::chrono::steady_clock::now() < deadline)
    cv.wait_for(lock, std::chrono::milliseconds(10));
  EXPECT_EQ(finished, 2);
  run.holds = llm.engine().stats().batch_window_holds;
  llm.engine().set_step_observer({});
  return run;
}

TEST(BatchWindowEngine, RequestsArrivingWithinTheWindowArePrefilledInOneStep) {
  const WindowRun held = two_requests(/*batch_wait_ms=*/1000);
  ASSERT_FALSE(held.steps.empty());
  EXPECT_EQ(held.steps.front().num_seqs, 2);
  EXPECT_EQ(held.steps.front().prefill_tokens, 12);
  EXPECT_GE(held.first_queue_seconds, 0.9) << "held to the window's end: two short prompts do not fill a step";
  EXPECT_GE(held.holds, 1u);
  EXPECT_LE(held.holds, 10u) << "the engine sleeps while it holds requests";

  const WindowRun unheld = two_requests(0);
  ASSERT_FALSE(unheld.steps.empty());
  EXPECT_EQ(unheld.steps.front().num_seqs, 1) << "the first request starts at once";
  EXPECT_EQ(unheld.holds, 0u);
}

}  // namespace
}  // namespace pagoda
