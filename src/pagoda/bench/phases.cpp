// Per-phase summaries (phases.h).
#include "pagoda/bench/phases.h"

#include <fmt/format.h>

#include <algorithm>

namespace pagoda::bench {

std::vector<PhaseSummary> summarize_phases(const std::vector<RequestRecord>& records, const std::vector<RatePhase>& schedule,
                                           const GoodputSlo& slo, const std::vector<double>& percentiles) {
  std::vector<std::vector<RequestRecord>> by_phase(schedule.size());
  for (const RequestRecord& r : records) by_phase[phase_of(schedule, r.scheduled_time)].push_back(r);
  std::vector<PhaseSummary> out;
  double start = 0;
  for (size_t i = 0; i < schedule.size(); ++i) {
    const std::vector<RequestRecord>& rs = by_phase[i];
    double first = 0, last = 0;
    for (size_t k = 0; k < rs.size(); ++k) {
      first = k == 0 ? rs[k].send_time : std::min(first, rs[k].send_time);
      last = std::max(last, rs[k].send_time + rs[k].e2el);
    }
    out.push_back({schedule[i], start, summarize(rs, std::max(last - first, 1e-9), slo, percentiles)});
    start += schedule[i].seconds;
  }
  return out;
}

void print_phases(std::FILE* out, const GoodputSlo& slo, const std::vector<PhaseSummary>& phases) {
  std::fprintf(out, "%s\n", fmt::format("{:=^60}", " Phases (--request-rate-schedule) ").c_str());
  std::fprintf(out, "%-14s %8s %8s %10s %10s %10s %10s\n", "from (s) rate", "requests", "failed", "req/s",
               slo.any() ? "goodput" : "-", "TTFT mean", "TPOT mean");
  for (const PhaseSummary& p : phases) {
    const Summary& s = p.summary;
    std::fprintf(out, "%5.0f %7.2f/s %8d %8d %10.2f %10s %8.1fms %8.1fms\n", p.start, p.phase.rate, s.completed + s.failed,
                 s.failed, s.request_throughput, slo.any() ? fmt::format("{:.2f}", s.request_goodput).c_str() : "-",
                 s.ttft_ms.mean, s.tpot_ms.mean);
  }
}

nlohmann::json phases_json(const GoodputSlo& slo, const std::vector<PhaseSummary>& phases) {
  nlohmann::json out = nlohmann::json::array();
  for (const PhaseSummary& p : phases) {
    const Summary& s = p.summary;
    nlohmann::json j = {{"start_s", p.start},
                   {"rate", p.phase.rate},
                   {"seconds", p.phase.seconds},
                   {"completed", s.completed},
                   {"failed", s.failed},
                   {"request_throughput", s.request_throughput},
                   {"request_goodput", slo.any() ? nlohmann::json(s.request_goodput) : nlohmann::json(nullptr)},
                   {"output_throughput", s.output_throughput},
                   {"mean_ttft_ms", s.ttft_ms.mean},
                   {"mean_tpot_ms", s.tpot_ms.mean}};
    for (const auto& [q, v] : s.ttft_ms.percentiles) j[fmt::format("p{:g}_ttft_ms", q)] = v;
    for (const auto& [q, v] : s.tpot_ms.percentiles) j[fmt::format("p{:g}_tpot_ms", q)] = v;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace pagoda::bench
