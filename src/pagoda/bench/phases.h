// A benchmark under --request-rate-schedule, phase by phase: each request counts in the phase its arrival
// fell in, and each phase gets its own summary (goodput above all: what a batch controller is judged by).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdio>
#include <vector>

#include "pagoda/bench/arrivals.h"
#include "pagoda/bench/request_record.h"
#include "pagoda/bench/summary.h"

namespace pagoda::bench {

struct PhaseSummary {
  RatePhase phase;
  double start = 0;  // seconds from the benchmark start
  Summary summary;   // over the phase's requests; duration: the first sent to the last finished
};

std::vector<PhaseSummary> summarize_phases(const std::vector<RequestRecord>& records, const std::vector<RatePhase>& schedule,
                                           const GoodputSlo& slo, const std::vector<double>& percentiles);
void print_phases(std::FILE* out, const GoodputSlo& slo, const std::vector<PhaseSummary>& phases);
nlohmann::json phases_json(const GoodputSlo& slo, const std::vector<PhaseSummary>& phases);

}  // namespace pagoda::bench
