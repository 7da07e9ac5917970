// RequestRecord: everything a benchmark measured about one request, client side. Times are seconds.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace pagoda::bench {

struct RequestRecord {
  int index = 0;
  double scheduled_time = 0;  // from the benchmark start: when the arrival process released it
  double send_time = 0;       // from the benchmark start: when it was sent (after a --max-concurrency slot)
  bool success = false;
  std::string error;          // why it failed ("" when it succeeded)
  double ttft = 0;            // send -> the first chunk carrying text
  double e2el = 0;            // send -> the end of the stream
  std::vector<double> itl;    // between consecutive chunks carrying text
  int num_chunks = 0;         // chunks carrying text
  int expected_prompt_len = -1;  // what the dataset asked for (-1: unknown, e.g. text from a file)
  int expected_output_len = 0;   // max_tokens sent
  int prompt_tokens = -1;        // the server's usage figures; -1: not reported
  int output_tokens = -1;
  int cached_tokens = -1;
  bool usage_reported = false;
  std::string finish_reason;
  std::string tenant;            // multi-tenant dataset: the tenant that sent it ("" otherwise)

  // (e2el - ttft) / (output_tokens - 1), for successful requests with two or more output tokens.
  std::optional<double> tpot() const {
    if (!success || output_tokens < 2) return std::nullopt;
    return (e2el - ttft) / (output_tokens - 1);
  }
};

}  // namespace pagoda::bench
