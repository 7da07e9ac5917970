// StreamMeasure: turns one streamed OpenAI response (completions or chat; the data of each SSE event and
// when it arrived) into a RequestRecord's timings and counts: TTFT at the first chunk carrying text,
// one inter-token latency per later text chunk, the usage of the final chunk (stream_options
// include_usage), the finish reason, and in-stream errors.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "pagoda/bench/request_record.h"

namespace pagoda::bench {

class StreamMeasure {
 public:
  using Clock = std::chrono::steady_clock;

  StreamMeasure(RequestRecord& record, bool chat, Clock::time_point sent) : r_(record), chat_(chat), sent_(sent) {}

  void on_event(std::string_view data, Clock::time_point at);
  // The stream ended at `at`; `transport_error` says how it failed ("" when the body ended normally).
  // Sets success, e2el and the fallbacks (output tokens counted from chunks when the server sent no usage).
  void finish(Clock::time_point at, const std::string& transport_error);

 private:
  double since_sent(Clock::time_point t) const { return std::chrono::duration<double>(t - sent_).count(); }

  RequestRecord& r_;
  bool chat_;
  Clock::time_point sent_;
  Clock::time_point last_text_{};
  Clock::time_point first_chunk_{};  // any chunk with choices (TTFT fallback for an all-empty output)
  bool done_ = false;                // saw [DONE]
};

}  // namespace pagoda::bench
