// Percentiles as numpy.percentile computes them by default ("linear"): for q in [0, 100] the virtual
// rank q/100 * (n - 1) between two order statistics, interpolated like numpy's _lerp. Distribution adds
// mean, median and the population standard deviation (numpy's ddof = 0).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace pagoda::bench {

// `sorted` ascending and non-empty; q in [0, 100] (throws std::invalid_argument otherwise).
double percentile_sorted(const std::vector<double>& sorted, double q);
double percentile(std::vector<double> values, double q);

struct Distribution {
  size_t count = 0;
  double mean = 0, median = 0, std = 0, min = 0, max = 0;  // all 0 for no values (as vLLM reports)
  std::vector<std::pair<double, double>> percentiles;     // (q, value) for each q asked
};

Distribution describe(std::vector<double> values, const std::vector<double>& qs);

}  // namespace pagoda::bench
