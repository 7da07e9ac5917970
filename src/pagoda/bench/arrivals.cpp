// Gamma-distributed inter-arrival gaps.
#include "pagoda/bench/arrivals.h"

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

}  // namespace pagoda::bench
