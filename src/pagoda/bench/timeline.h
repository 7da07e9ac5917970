// ThroughputTimeline: a benchmark run in time bins: output tokens per second (each request's tokens
// spread evenly over the chunks that carried its text, at the chunks' arrival times), requests in flight
// (mean over the bin) and requests finished per second.
#pragma once

#include <vector>

#include "pagoda/bench/request_record.h"

namespace pagoda::bench {

struct ThroughputTimeline {
  double bin_seconds = 1;
  std::vector<double> output_tokens_per_s;
  std::vector<double> requests_running;
  std::vector<double> completed_per_s;
};

// Bins cover [0, duration] (at least one bin).
ThroughputTimeline throughput_timeline(const std::vector<RequestRecord>& records, double duration, double bin_seconds);

}  // namespace pagoda::bench
