// Benchmark figures from request records.
#include "pagoda/bench/summary.h"

#include <algorithm>
#include <cmath>

#include "pagoda/bench/timeline.h"
#include "pagoda/core/error.h"

namespace pagoda::bench {

bool GoodputSlo::met_by(const RequestRecord& r) const {
  if (!r.success) return false;
  if (ttft_ms && r.ttft * 1e3 > *ttft_ms) return false;
  if (tpot_ms && r.tpot().value_or(0) * 1e3 > *tpot_ms) return false;  // one output token: no TPOT to miss
  if (e2el_ms && r.e2el * 1e3 > *e2el_ms) return false;
  return true;
}

GoodputSlo parse_goodput(const std::vector<std::string>& specs) {
  GoodputSlo slo;
  for (const std::string& spec : specs) {
    const size_t colon = spec.find(':');
    const std::string key = spec.substr(0, colon);
    const auto bad = [&] {
      return InvalidRequest("--goodput " + spec + ": expected METRIC:MILLISECONDS with METRIC one of ttft, tpot, e2el");
    };
    if (colon == std::string::npos) throw bad();
    double ms = 0;
    try {
      size_t used = 0;
      ms = std::stod(spec.substr(colon + 1), &used);
      if (used != spec.size() - colon - 1) throw bad();
    } catch (const std::logic_error&) {
      throw bad();
    }
    if (!(ms > 0) || std::isinf(ms)) throw bad();
    if (key == "ttft") slo.ttft_ms = ms;
    else if (key == "tpot") slo.tpot_ms = ms;
    else if (key == "e2el") slo.e2el_ms = ms;
    else throw bad();
  }
  return slo;
}

int peak_concurrency(const std::vector<RequestRecord>& records) {
  std::vector<std::pair<double, int>> events;
  for (const RequestRecord& r : records) {
    events.emplace_back(r.send_time, +1);
    events.emplace_back(r.send_time + r.e2el, -1);
  }
  std::sort(events.begin(), events.end());  // at equal times, -1 (an end) sorts before +1 (a start)
  int running = 0, peak = 0;
  for (const auto& [t, delta] : events) peak = std::max(peak, running += delta);
  return peak;
}

Summary summarize(const std::vector<RequestRecord>& records, double duration, const GoodputSlo& slo,
                  const std::vector<double>& percentiles) {
  Summary s;
  s.duration = duration;
  std::vector<double> ttft, tpot, itl, e2el;
  for (const RequestRecord& r : records) {
    if (!r.success) {
      ++s.failed;
      continue;
    }
    ++s.completed;
    s.total_input += std::max(r.prompt_tokens, 0);
    if (r.cached_tokens >= 0) s.total_cached_input = std::max<int64_t>(s.total_cached_input, 0) + r.cached_tokens;
    s.total_output += std::max(r.output_tokens, 0);
    ttft.push_back(r.ttft * 1e3);
    e2el.push_back(r.e2el * 1e3);
    if (auto t = r.tpot()) tpot.push_back(*t * 1e3);
    for (double gap : r.itl) itl.push_back(gap * 1e3);
    if (slo.any() && slo.met_by(r)) ++s.good;
  }
  if (duration > 0) {
    s.request_throughput = s.completed / duration;
    s.request_goodput = slo.any() ? s.good / duration : 0;
    s.output_throughput = static_cast<double>(s.total_output) / duration;
    s.total_token_throughput = static_cast<double>(s.total_input + s.total_output) / duration;
  }
  const ThroughputTimeline per_second = throughput_timeline(records, duration, std::min(1.0, std::max(duration, 1e-3)));
  for (double v : per_second.output_tokens_per_s) s.peak_output_throughput = std::max(s.peak_output_throughput, v);
  s.peak_concurrency = peak_concurrency(records);
  s.ttft_ms = describe(std::move(ttft), percentiles);
  s.tpot_ms = describe(std::move(tpot), percentiles);
  s.itl_ms = describe(std::move(itl), percentiles);
  s.e2el_ms = describe(std::move(e2el), percentiles);
  return s;
}

}  // namespace pagoda::bench
