// numpy-compatible linear percentiles.
#include "pagoda/bench/percentile.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace pagoda::bench {

double percentile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) throw std::invalid_argument("percentile of no values");
  if (!(q >= 0 && q <= 100)) throw std::invalid_argument("percentile q must be within [0, 100]");
  const double rank = q / 100 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double t = rank - static_cast<double>(lo);
  const double a = sorted[lo], b = sorted[hi], diff = b - a;
  // numpy's _lerp: from the nearer end, so that t = 1 gives b exactly.
  return t >= 0.5 ? b - diff * (1 - t) : a + diff * t;
}

double percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return percentile_sorted(values, q);
}

Distribution describe(std::vector<double> values, const std::vector<double>& qs) {
  Distribution d;
  d.count = values.size();
  if (values.empty()) {
    for (double q : qs) d.percentiles.emplace_back(q, 0.0);
    return d;
  }
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  d.mean = sum / static_cast<double>(values.size());
  double sq = 0;
  for (double v : values) sq += (v - d.mean) * (v - d.mean);
  d.std = std::sqrt(sq / static_cast<double>(values.size()));
  d.min = values.front();
  d.max = values.back();
  d.median = percentile_sorted(values, 50);
  for (double q : qs) d.percentiles.emplace_back(q, percentile_sorted(values, q));
  return d;
}

}  // namespace pagoda::bench
