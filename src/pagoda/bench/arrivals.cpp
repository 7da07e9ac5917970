// Gamma-distributed inter-arrival gaps.
#include "pagoda/bench/arrivals.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

namespace pagoda::bench {

std::vector<double> arrival_times(int num_requests, double rate, double burstiness, uint64_t seed) {
  if (!(rate > 0)) throw std::invalid_argument("the request rate must be positive (or inf)");
  if (!(burstiness > 0) || std::isinf(burstiness)) throw std::invalid_argument("burstiness must be a positive number");
  std::vector<double> times(static_cast<size_t>(std::max(num_requests, 0)), 0.0);
  if (std::isinf(rate)) return times;
  std::mt19937_64 rng(seed);
  std::gamma_distribution<double> gap(burstiness, 1.0 / (rate * burstiness));
  for (size_t i = 1; i < times.size(); ++i) times[i] = times[i - 1] + gap(rng);
  return times;
}

std::vector<RatePhase> parse_rate_schedule(const std::string& spec) {
  std::vector<RatePhase> out;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t end = std::min(spec.find(',', start), spec.size());
    const std::string piece = spec.substr(start, end - start);
    const size_t colon = piece.find(':');
    RatePhase p;
    try {
      if (colon == std::string::npos) throw std::invalid_argument("");
      size_t used = 0;
      p.rate = std::stod(piece.substr(0, colon), &used);
      if (used != colon) throw std::invalid_argument("");
      const std::string secs = piece.substr(colon + 1);
      p.seconds = std::stod(secs, &used);
      if (used != secs.size()) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw std::invalid_argument("'" + piece + "': expected RATE:SECONDS, e.g. 4:20");
    }
    if (!(p.rate > 0) || std::isinf(p.rate) || !(p.seconds > 0) || std::isinf(p.seconds))
      throw std::invalid_argument("'" + piece + "': the rate and the seconds must be positive and finite");
    out.push_back(p);
    if (out.size() > 1000) throw std::invalid_argument("more than 1000 phases");
    start = end + 1;
  }
  return out;
}

size_t phase_of(const std::vector<RatePhase>& schedule, double t) {
  double end = 0;
  for (size_t i = 0; i < schedule.size(); ++i) {
    end += schedule[i].seconds;
    if (t < end) return i;
  }
  return schedule.empty() ? 0 : schedule.size() - 1;
}

std::vector<double> arrival_times(int num_requests, const std::vector<RatePhase>& schedule, double burstiness,
                                  uint64_t seed) {
  if (schedule.empty()) throw std::invalid_argument("an empty rate schedule");
  if (!(burstiness > 0) || std::isinf(burstiness)) throw std::invalid_argument("burstiness must be a positive number");
  std::vector<double> times(static_cast<size_t>(std::max(num_requests, 0)), 0.0);
  std::mt19937_64 rng(seed);
  double t = 0;
  for (size_t i = 1; i < times.size(); ++i) {
    while (true) {
      const size_t phase = phase_of(schedule, t);
      const double rate = schedule[phase].rate;
      std::gamma_distribution<double> gap(burstiness, 1.0 / (rate * burstiness));
      const double next = t + gap(rng);
      double phase_end = 0;
      for (size_t k = 0; k <= phase; ++k) phase_end += schedule[k].seconds;
      if (phase + 1 < schedule.size() && next >= phase_end) {
        t = phase_end;  // redraw from the boundary at the next phase's rate
        continue;
      }
      t = next;
      break;
    }
    times[i] = t;
  }
  return times;
}

}  // namespace pagoda::bench
