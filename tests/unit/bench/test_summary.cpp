// Summary figures: throughput, TPOT per request, goodput, peak concurrency and the timeline.
#include <gtest/gtest.h>

#include "pagoda/bench/summary.h"
#include "pagoda/bench/timeline.h"
#include "pagoda/core/error.h"

namespace pagoda::bench {
namespace {

RequestRecord ok(double send, double ttft, double e2el, int prompt, int output, std::vector<double> itl) {
  RequestRecord r;
  r.success = true;
  r.send_time = send;
  r.ttft = ttft;
  r.e2el = e2el;
  r.prompt_tokens = prompt;
  r.output_tokens = output;
  r.itl = std::move(itl);
  r.num_chunks = static_cast<int>(r.itl.size()) + 1;
  return r;
}

TEST(Summary, ThroughputLatencyAndGoodput) {
  std::vector<RequestRecord> records = {
      ok(0.0, 0.010, 0.110, 10, 11, {0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01}),  // tpot 10 ms
      ok(0.5, 0.100, 0.400, 20, 4, {0.1, 0.1, 0.1}),                                                // tpot 100 ms
      ok(1.0, 0.020, 0.020, 5, 1, {}),                                                              // no tpot
  };
  RequestRecord failed;
  failed.error = "HTTP 500: boom";
  records.push_back(failed);
  const GoodputSlo slo = parse_goodput({"ttft:50", "tpot:50"});
  const Summary s = summarize(records, 2.0, slo, {50, 99});
  EXPECT_EQ(s.completed, 3);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.total_input, 35);
  EXPECT_EQ(s.total_output, 16);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(s.output_throughput, 8);
  EXPECT_DOUBLE_EQ(s.total_token_throughput, 25.5);
  EXPECT_EQ(s.good, 2);  // the second misses both limits; one output token meets any TPOT limit
  EXPECT_DOUBLE_EQ(s.request_goodput, 1.0);
  EXPECT_EQ(s.tpot_ms.count, 2u);
  EXPECT_NEAR(s.tpot_ms.mean, 55, 1e-9);
  EXPECT_EQ(s.itl_ms.count, 13u);
  EXPECT_EQ(s.ttft_ms.count, 3u);
  EXPECT_NEAR(s.ttft_ms.median, 20, 1e-9);
  EXPECT_NEAR(s.e2el_ms.max, 400, 1e-9);
  EXPECT_EQ(s.peak_concurrency, 1);  // 0-0.11, 0.5-0.9, 1.0-1.02 never overlap
}

TEST(Summary, PrefixCachedInputTokensWhenReported) {
  std::vector<RequestRecord> records = {ok(0, 0.01, 0.1, 100, 1, {}), ok(0, 0.01, 0.1, 50, 1, {})};
  EXPECT_EQ(summarize(records, 1.0, {}, {50}).total_cached_input, -1);  // no response reported it
  records[0].cached_tokens = 64;
  records[1].cached_tokens = 0;
  EXPECT_EQ(summarize(records, 1.0, {}, {50}).total_cached_input, 64);
}

TEST(Summary, PeakConcurrency) {
  std::vector<RequestRecord> r = {ok(0, 0, 1.0, 1, 1, {}), ok(0.5, 0, 1.0, 1, 1, {}), ok(0.7, 0, 0.1, 1, 1, {}),
                                  ok(1.5, 0, 1.0, 1, 1, {})};
  EXPECT_EQ(peak_concurrency(r), 3);  // 0.7-0.8: all of the first three
}

TEST(Summary, GoodputSpecErrors) {
  EXPECT_THROW(parse_goodput({"ttft"}), InvalidRequest);
  EXPECT_THROW(parse_goodput({"latency:5"}), InvalidRequest);
  EXPECT_THROW(parse_goodput({"ttft:-1"}), InvalidRequest);
  EXPECT_THROW(parse_goodput({"ttft:5ms"}), InvalidRequest);
  const GoodputSlo slo = parse_goodput({"e2el:250"});
  EXPECT_TRUE(slo.any());
  EXPECT_EQ(*slo.e2el_ms, 250);
  EXPECT_FALSE(parse_goodput({}).any());
}

TEST(Timeline, SpreadsTokensOverChunksAndCountsInFlight) {
  // Four tokens in two chunks at 0.25 s and 1.25 s; in flight from 0 to 1.5 s.
  std::vector<RequestRecord> r = {ok(0, 0.25, 1.5, 3, 4, {1.0})};
  const ThroughputTimeline t = throughput_timeline(r, 2.0, 1.0);
  ASSERT_EQ(t.output_tokens_per_s.size(), 2u);
  EXPECT_DOUBLE_EQ(t.output_tokens_per_s[0], 2);
  EXPECT_DOUBLE_EQ(t.output_tokens_per_s[1], 2);
  EXPECT_DOUBLE_EQ(t.requests_running[0], 1);
  EXPECT_DOUBLE_EQ(t.requests_running[1], 0.5);
  EXPECT_DOUBLE_EQ(t.completed_per_s[1], 1);
}

}  // namespace
}  // namespace pagoda::bench
