// The printed result table, laid out like vllm bench serve's, and the JSON result file (--json): the
// settings, the summary under vLLM's key names (mean_ttft_ms, p99_tpot_ms, ...), a throughput timeline
// and one record per request.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

#include "pagoda/bench/serve_benchmark.h"
#include "pagoda/bench/summary.h"

namespace pagoda::bench {

void print_report(std::FILE* out, const ServeBenchmarkOptions& options, const GoodputSlo& slo, const Summary& summary);

nlohmann::json result_json(const ServeBenchmarkOptions& options, const GoodputSlo& slo, const std::vector<double>& percentiles,
                           const ServeBenchmarkRun& run, const Summary& summary, const std::string& label);

nlohmann::json record_json(const RequestRecord& record);

}  // namespace pagoda::bench
