// Request traces (JSON line, access-log summary, durations), the trace file, and the GPU timeline's
// heatmap built from step records (with the sampler off).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "pagoda/core/error.h"
#include "pagoda/server/gpu_timeline.h"
#include "pagoda/server/request_trace.h"
#include "pagoda/server/trace_writer.h"

namespace pagoda::server {
namespace {

using std::chrono::milliseconds;

RequestTrace sample_trace() {
  RequestTrace t;
  t.id = "cmpl-1";
  t.engine_id = 7;
  t.model = "m";
  t.tenant = "-";
  t.finish_reason = "length";
  t.usage = Usage{5, 3, 0};
  t.completion_tokens = 3;
  t.arrival = RequestTrace::Clock::now();
  t.arrival_wall = std::chrono::system_clock::now();
  t.times.queued = t.arrival + milliseconds(1);
  t.times.scheduled = t.arrival + milliseconds(3);
  t.times.prefill_done = t.arrival + milliseconds(10);
  t.token_times = {t.arrival + milliseconds(10), t.arrival + milliseconds(14), t.arrival + milliseconds(20)};
  t.finished = t.arrival + milliseconds(20);
  return t;
}

TEST(RequestTrace, DurationsJsonAndSummary) {
  const RequestTrace t = sample_trace();
  EXPECT_NEAR(*t.queue_seconds(), 0.002, 1e-9);
  EXPECT_NEAR(*t.prefill_seconds(), 0.007, 1e-9);
  EXPECT_NEAR(*t.decode_seconds(), 0.010, 1e-9);
  EXPECT_NEAR(*t.inference_seconds(), 0.017, 1e-9);
  EXPECT_NEAR(*t.time_to_first_token(), 0.010, 1e-9);
  EXPECT_NEAR(*t.time_per_output_token(), 0.005, 1e-9);
  const nlohmann::json j = t.to_json();
  EXPECT_EQ(j["id"], "cmpl-1");
  EXPECT_EQ(j["engine_request_id"], 7);
  EXPECT_EQ(j["completion_tokens"], 3);
  EXPECT_NEAR(j["queued"].get<double>(), 0.001, 1e-9);
  EXPECT_NEAR(j["scheduled"].get<double>(), 0.003, 1e-9);
  EXPECT_NEAR(j["prefill_done"].get<double>(), 0.010, 1e-9);
  EXPECT_NEAR(j["finished"].get<double>(), 0.020, 1e-9);
  ASSERT_EQ(j["token_times"].size(), 3u);
  EXPECT_NEAR(j["token_times"][1].get<double>(), 0.014, 1e-9);
  EXPECT_GT(j["arrival_time"].get<double>(), 1.6e9);  // Unix seconds
  EXPECT_EQ(t.log_summary(), "queue=2ms prefill=7ms ttft=10ms decode=10ms tpot=5ms e2e=20ms");
}

TEST(RequestTrace, NeverScheduledIsNull) {
  RequestTrace t = sample_trace();
  t.times.scheduled = {};
  t.times.prefill_done = {};
  t.token_times.clear();
  t.completion_tokens = 0;
  const nlohmann::json j = t.to_json();
  EXPECT_TRUE(j["scheduled"].is_null());
  EXPECT_TRUE(j["prefill_done"].is_null());
  EXPECT_FALSE(t.time_per_output_token());
  EXPECT_NE(t.log_summary().find("prefill=- ttft=-"), std::string::npos) << t.log_summary();
}

TEST(TraceWriter, AppendsOneLinePerTrace) {
  const std::string path = (std::filesystem::temp_directory_path() / "pagoda_trace_test.jsonl").string();
  std::filesystem::remove(path);
  {
    TraceWriter w(path);
    w.write(sample_trace());
    w.write(sample_trace());
  }
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    EXPECT_EQ(nlohmann::json::parse(line)["finish_reason"], "length");
    ++n;
  }
  EXPECT_EQ(n, 2);
  EXPECT_THROW(TraceWriter("/nonexistent-dir/trace.jsonl"), Error);
}

TEST(GpuTimeline, HeatmapFromStepsWithTheSamplerOff) {
  GpuTimeline timeline(nullptr);
  const auto now = std::chrono::steady_clock::now();
  // Ten decode steps of 4 sequences (CUDA graph of 8), then one prefill step of 300 tokens.
  for (int i = 0; i < 10; ++i) {
    StepRecord s;
    s.start = now + milliseconds(10 * i);
    s.execute_seconds = 0.005;
    s.decode_seqs = 4;
    s.num_seqs = 4;
    s.graph_batch_size = 8;
    timeline.add_step(s);
  }
  StepRecord prefill;
  prefill.start = now + milliseconds(100);
  prefill.execute_seconds = 0.005;
  prefill.prefill_tokens = 300;
  prefill.num_seqs = 1;
  timeline.add_step(prefill);
  EXPECT_EQ(timeline.num_steps(), 11u);
  std::this_thread::sleep_for(milliseconds(130));
  const metrics::Heatmap h = timeline.heatmap(0, 0.01);
  ASSERT_GE(h.panels.size(), 4u);
  EXPECT_EQ(h.panels[0].note, "sampler not started");
  const metrics::HeatmapPanel& engine = h.panels[1];
  const auto row = [&](const metrics::HeatmapPanel& p, const std::string& name) -> const metrics::HeatmapRow& {
    for (const auto& r : p.rows)
      if (r.name == name) return r;
    throw std::runtime_error("no row " + name);
  };
  double busy_sum = 0, decode_sum = 0;
  for (double v : row(engine, "busy").values) busy_sum += v;
  for (double v : row(engine, "decode tokens").values) decode_sum += v;
  EXPECT_NEAR(busy_sum * 0.01 / 100, 11 * 0.005, 1e-9);  // every step's busy time lands in some bin
  EXPECT_NEAR(decode_sum * 0.01, 40, 1e-9);
  double padding = 0;
  for (double v : row(engine, "CUDA graph padding").values)
    if (!std::isnan(v)) padding = v;
  EXPECT_DOUBLE_EQ(padding, 50);  // 4 of 8
  // Composition: rows for 4-7 decode sequences and for prefill-only steps.
  EXPECT_NO_THROW(row(h.panels[2], "decode 4-7"));
  EXPECT_NO_THROW(row(h.panels[2], "decode 0"));
  EXPECT_NO_THROW(row(h.panels[3], "prefill 256-1023"));
  EXPECT_THROW(timeline.heatmap(-1, 0), std::invalid_argument);
  EXPECT_THROW(timeline.heatmap(0, 1e-7), std::invalid_argument);  // too many bins
}

}  // namespace
}  // namespace pagoda::server

namespace pagoda::server {
namespace {

// The timeline keeps its last steps in a fixed ring (the server's memory stays flat as steps accumulate).
TEST(GpuTimeline, KeepsTheLastStepsInAFixedRing) {
  GpuTimeline timeline(nullptr, 3);
  StepRecord step;
  step.start = GpuTimeline::Clock::now();
  step.execute_seconds = step.total_seconds = 0.001;
  for (int i = 0; i < 5; ++i) {
    step.prefill_tokens = i;
    timeline.add_step(step);
  }
  EXPECT_EQ(timeline.num_steps(), 3u);
  std::vector<int> kept;
  for (const StepRecord& s : timeline.steps()) kept.push_back(s.prefill_tokens);
  EXPECT_EQ(kept, (std::vector<int>{2, 3, 4})) << "the newest steps, oldest first";
  EXPECT_NO_THROW(timeline.heatmap());
}

}  // namespace
}  // namespace pagoda::server
