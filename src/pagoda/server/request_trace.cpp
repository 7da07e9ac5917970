// RequestTrace: durations, the JSON line and the access-log summary.
#include "pagoda/server/request_trace.h"

#include <fmt/format.h>

namespace pagoda::server {
namespace {

nlohmann::json optional_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

std::string ms(const std::optional<double>& v) {
  if (!v) return "-";
  const double x = *v * 1e3;
  return x >= 100 ? fmt::format("{:.0f}ms", x) : fmt::format("{:.3g}ms", x);
}

}  // namespace

std::optional<double> RequestTrace::between(Clock::time_point a, Clock::time_point b) {
  if (a == Clock::time_point{} || b == Clock::time_point{}) return std::nullopt;
  return std::chrono::duration<double>(b - a).count();
}

std::optional<double> RequestTrace::time_to_first_token() const {
  if (token_times.empty()) return std::nullopt;
  return between(arrival, token_times.front());
}

std::optional<double> RequestTrace::time_per_output_token() const {
  const std::optional<double> decode = decode_seconds();
  if (!decode || completion_tokens < 2) return std::nullopt;
  return *decode / (completion_tokens - 1);
}

nlohmann::json RequestTrace::to_json() const {
  const auto since_arrival = [&](Clock::time_point t) { return optional_json(between(arrival, t)); };
  nlohmann::json tokens = nlohmann::json::array();
  for (Clock::time_point t : token_times) tokens.push_back(std::chrono::duration<double>(t - arrival).count());
  const double wall = std::chrono::duration<double>(arrival_wall.time_since_epoch()).count();
  return {{"id", id},
          {"choice", choice},
          {"engine_request_id", engine_id},
          {"model", model},
          {"tenant", tenant},
          {"finish_reason", finish_reason},
          {"prompt_tokens", usage.prompt_tokens},
          {"cached_tokens", usage.cached_tokens},
          {"completion_tokens", completion_tokens},
          {"preemptions", times.num_preemptions},
          {"fallback_tokens", times.fallback_tokens},
          {"arrival_time", wall},
          {"queued", since_arrival(times.queued)},
          {"scheduled", since_arrival(times.scheduled)},
          {"prefill_done", since_arrival(times.prefill_done)},
          {"finished", since_arrival(finished)},
          {"token_times", std::move(tokens)}};
}

std::string RequestTrace::log_summary() const {
  return fmt::format("queue={} prefill={} ttft={} decode={} tpot={} e2e={}", ms(queue_seconds()), ms(prefill_seconds()),
                     ms(time_to_first_token()), ms(decode_seconds()), ms(time_per_output_token()),
                     ms(between(arrival, finished)));
}

}  // namespace pagoda::server
