// Summary: a serving benchmark's figures as vllm bench serve reports them: completed and failed requests,
// token totals (the server's usage), request / token throughput and goodput, peak output throughput and
// concurrency, and the distributions (milliseconds) of TTFT, TPOT, ITL and end-to-end latency.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pagoda/bench/percentile.h"
#include "pagoda/bench/request_record.h"

namespace pagoda::bench {

// --goodput ttft:MS tpot:MS e2el:MS: a request is "good" when it succeeded within every limit given.
struct GoodputSlo {
  std::optional<double> ttft_ms, tpot_ms, e2el_ms;
  bool any() const { return ttft_ms || tpot_ms || e2el_ms; }
  bool met_by(const RequestRecord& r) const;
};
// Throws pagoda::InvalidRequest for an unknown metric or a value that is not a positive number.
GoodputSlo parse_goodput(const std::vector<std::string>& specs);

struct Summary {
  int completed = 0, failed = 0, good = 0;
  int64_t total_input = 0, total_output = 0;  // successful requests' usage
  // Of total_input, the prompt tokens the server's prefix cache served (usage.prompt_tokens_details
  // .cached_tokens); -1 when no response reported it.
  int64_t total_cached_input = -1;
  double duration = 0;
  double request_throughput = 0, request_goodput = 0, output_throughput = 0, total_token_throughput = 0;
  double peak_output_throughput = 0;  // tok/s, the busiest one-second bin
  int peak_concurrency = 0;           // most requests in flight at once
  Distribution ttft_ms, tpot_ms, itl_ms, e2el_ms;
};

// `duration`: seconds from the first request sent to the last finished. `percentiles`: e.g. {50, 90, 99}.
Summary summarize(const std::vector<RequestRecord>& records, double duration, const GoodputSlo& slo,
                  const std::vector<double>& percentiles);

// Requests in flight at most at once (a request is in flight from send_time for e2el seconds).
int peak_concurrency(const std::vector<RequestRecord>& records);

}  // namespace pagoda::bench
