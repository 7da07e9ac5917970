// SSE framing, the measurement of one OpenAI stream, URL parsing and request bodies.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pagoda/bench/request_body.h"
#include "pagoda/bench/sse_parser.h"
#include "pagoda/bench/stream_measure.h"
#include "pagoda/bench/url.h"
#include "pagoda/core/error.h"

namespace pagoda::bench {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

TEST(SseParser, SplitsEventsAcrossArbitraryChunks) {
  const std::string stream = "data: {\"a\":1}\n\n: comment\r\ndata: x\r\ndata: y\r\n\r\nevent: e\ndata: [DONE]\n\n";
  for (size_t cut = 1; cut < stream.size(); ++cut) {
    SseParser p;
    std::vector<std::string> events = p.feed(stream.substr(0, cut));
    for (auto& e : p.feed(stream.substr(cut))) events.push_back(e);
    ASSERT_EQ(events, (std::vector<std::string>{"{\"a\":1}", "x\ny", "[DONE]"})) << "cut at " << cut;
    EXPECT_FALSE(p.pending());
  }
  SseParser p;
  EXPECT_TRUE(p.feed("data: half").empty());
  EXPECT_TRUE(p.pending());
}

std::string chunk(const std::string& text, const char* finish = nullptr) {
  nlohmann::json c = {{"choices", {{{"index", 0}, {"text", text}, {"finish_reason", finish ? nlohmann::json(finish) : nlohmann::json(nullptr)}}}}};
  return c.dump();
}

TEST(StreamMeasure, TimesTextChunksAndReadsUsage) {
  RequestRecord r;
  const Clock::time_point t0 = Clock::now();
  StreamMeasure m(r, /*chat=*/false, t0);
  m.on_event(chunk(""), t0 + milliseconds(5));  // empty: not the first token
  m.on_event(chunk("Once"), t0 + milliseconds(20));
  m.on_event(chunk(" upon"), t0 + milliseconds(30));
  m.on_event(chunk(" a time"), t0 + milliseconds(45));  // two tokens in one chunk
  m.on_event(chunk("", "length"), t0 + milliseconds(46));
  m.on_event(R"({"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":3}}})",
             t0 + milliseconds(47));
  m.on_event("[DONE]", t0 + milliseconds(47));
  m.finish(t0 + milliseconds(50), "");
  EXPECT_TRUE(r.success) << r.error;
  EXPECT_NEAR(r.ttft, 0.020, 1e-9);
  ASSERT_EQ(r.itl.size(), 2u);
  EXPECT_NEAR(r.itl[0], 0.010, 1e-9);
  EXPECT_NEAR(r.itl[1], 0.015, 1e-9);
  EXPECT_NEAR(r.e2el, 0.050, 1e-9);
  EXPECT_EQ(r.num_chunks, 3);
  EXPECT_EQ(r.prompt_tokens, 7);
  EXPECT_EQ(r.output_tokens, 4);
  EXPECT_EQ(r.cached_tokens, 3);
  EXPECT_EQ(r.finish_reason, "length");
  ASSERT_TRUE(r.tpot());
  EXPECT_NEAR(*r.tpot(), (0.050 - 0.020) / 3, 1e-9);
}

TEST(StreamMeasure, ChatContentAndFallbacks) {
  RequestRecord r;
  const Clock::time_point t0 = Clock::now();
  StreamMeasure m(r, /*chat=*/true, t0);
  m.on_event(R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})", t0 + milliseconds(1));
  m.on_event(R"({"choices":[{"index":0,"delta":{"content":"Hi"}}]})", t0 + milliseconds(8));
  m.on_event(R"({"choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"stop"}]})", t0 + milliseconds(9));
  m.on_event("[DONE]", t0 + milliseconds(9));
  m.finish(t0 + milliseconds(10), "");
  EXPECT_TRUE(r.success);
  EXPECT_NEAR(r.ttft, 0.008, 1e-9);
  EXPECT_FALSE(r.usage_reported);
  EXPECT_EQ(r.output_tokens, 2);  // no usage: one token per text chunk
}

TEST(StreamMeasure, ErrorsFailTheRequest) {
  const Clock::time_point t0 = Clock::now();
  RequestRecord in_stream;
  StreamMeasure a(in_stream, false, t0);
  a.on_event(R"({"error":{"message":"boom","code":500}})", t0);
  a.on_event("[DONE]", t0);
  a.finish(t0, "");
  EXPECT_FALSE(in_stream.success);
  EXPECT_EQ(in_stream.error, "boom");
  EXPECT_FALSE(in_stream.tpot());

  RequestRecord cut;
  StreamMeasure b(cut, false, t0);
  b.on_event(chunk("x"), t0);
  b.finish(t0, "");
  EXPECT_FALSE(cut.success);
  EXPECT_NE(cut.error.find("[DONE]"), std::string::npos);

  RequestRecord refused;
  StreamMeasure c(refused, false, t0);
  c.finish(t0, "cannot connect to http://127.0.0.1:1: Connection refused");
  EXPECT_FALSE(refused.success);
  EXPECT_NE(refused.error.find("Connection refused"), std::string::npos);
}

TEST(BaseUrl, ParsesAndRejects) {
  BaseUrl u = parse_base_url("http://localhost:8000");
  EXPECT_EQ(u.host, "localhost");
  EXPECT_EQ(u.port, "8000");
  EXPECT_EQ(u.target("/v1/completions"), "/v1/completions");
  u = parse_base_url("http://10.0.0.2/api/");
  EXPECT_EQ(u.port, "80");
  EXPECT_EQ(u.target("/v1/models"), "/api/v1/models");
  u = parse_base_url("http://[::1]:9000");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.to_string(), "http://[::1]:9000");
  EXPECT_THROW(parse_base_url("https://x:1"), InvalidRequest);
  EXPECT_THROW(parse_base_url("http://:80"), InvalidRequest);
  EXPECT_THROW(parse_base_url("http://h:99999"), InvalidRequest);
  EXPECT_THROW(parse_base_url("http://h:8x"), InvalidRequest);
}

TEST(RequestBody, CompletionsAndChat) {
  BenchPrompt ids;
  ids.ids = {5, 6, 7};
  ids.output_len = 9;
  RequestSettings s;
  s.model = "m";
  s.ignore_eos = false;
  s.extra_body = {{"top_k", 3}};
  nlohmann::json j = nlohmann::json::parse(request_body(s, ids));
  EXPECT_EQ(j["prompt"], nlohmann::json({5, 6, 7}));
  EXPECT_EQ(j["max_tokens"], 9);
  EXPECT_EQ(j["ignore_eos"], false);  // stated either way
  EXPECT_EQ(j["stream"], true);
  EXPECT_EQ(j["stream_options"]["include_usage"], true);
  EXPECT_EQ(j["top_k"], 3);
  BenchPrompt text;
  text.text = "hello";
  text.is_text = true;
  s.chat = true;
  s.ignore_eos = true;
  j = nlohmann::json::parse(request_body(s, text));
  EXPECT_EQ(j["messages"][0]["content"], "hello");
  EXPECT_EQ(j["max_completion_tokens"], 128);
  EXPECT_EQ(j["ignore_eos"], true);
  EXPECT_FALSE(j.contains("prompt"));
}

}  // namespace
}  // namespace pagoda::bench
