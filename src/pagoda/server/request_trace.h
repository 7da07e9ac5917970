// RequestTrace: one engine request's life as the server saw it: the engine's times (queued, first
// scheduled, prefill done, each token, finished) next to the server's own (arrival). It becomes a JSON
// line (`pagoda serve --trace-file`), a summary in the access log and observations of the latency
// histograms.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "pagoda/engine/request.h"

namespace pagoda::server {

struct RequestTrace {
  using Clock = std::chrono::steady_clock;

  std::string id;      // the response id (cmpl-..., chatcmpl-...)
  int choice = 0;      // choice index within the response
  RequestId engine_id = 0;
  std::string model, tenant, finish_reason;
  Usage usage;                                  // prompt and cached tokens (the engine's)
  int completion_tokens = 0;                    // tokens the client got
  Clock::time_point arrival;                    // the server handed the request to generation
  std::chrono::system_clock::time_point arrival_wall;
  RequestTimes times;                           // engine: queued, scheduled, prefill_done
  std::vector<Clock::time_point> token_times;   // engine: when each token the client got was emitted
  Clock::time_point finished;                   // engine: the event that ended it

  // Seconds from `a` to `b`; nullopt when either did not happen.
  static std::optional<double> between(Clock::time_point a, Clock::time_point b);
  std::optional<double> queue_seconds() const { return between(times.queued, times.scheduled); }
  std::optional<double> prefill_seconds() const { return between(times.scheduled, times.prefill_done); }
  std::optional<double> decode_seconds() const { return between(times.prefill_done, finished); }
  std::optional<double> inference_seconds() const { return between(times.scheduled, finished); }
  std::optional<double> time_to_first_token() const;
  std::optional<double> time_per_output_token() const;  // decode / (tokens - 1), with 2+ tokens

  // {"id", "choice", ..., "arrival_time" (Unix seconds), then seconds since arrival: "queued",
  //  "scheduled", "prefill_done", "finished", "token_times": [...]; null for what never happened}.
  nlohmann::json to_json() const;
  // For the access log: "queue=0.12ms prefill=2.3ms ttft=2.5ms decode=20.1ms tpot=1.31ms e2e=22.6ms".
  std::string log_summary() const;
};

}  // namespace pagoda::server
