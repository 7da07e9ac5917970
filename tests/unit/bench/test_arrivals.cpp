// Arrival times: all at once for inf, gamma gaps with the requested mean and spread, seeded.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "pagoda/bench/arrivals.h"

namespace pagoda::bench {
namespace {

struct GapStats {
  double mean = 0, cv = 0;  // coefficient of variation: 1 for exponential gaps
};

GapStats gaps(const std::vector<double>& t) {
  std::vector<double> g;
  for (size_t i = 1; i < t.size(); ++i) g.push_back(t[i] - t[i - 1]);
  double m = 0;
  for (double x : g) m += x;
  m /= g.size();
  double var = 0;
  for (double x : g) var += (x - m) * (x - m);
  var /= g.size();
  return {m, std::sqrt(var) / m};
}

TEST(Arrivals, InfiniteRateSendsEverythingAtOnce) {
  const auto t = arrival_times(50, std::numeric_limits<double>::infinity(), 1, 7);
  ASSERT_EQ(t.size(), 50u);
  for (double x : t) EXPECT_EQ(x, 0);
}

TEST(Arrivals, PoissonHasTheRateAndExponentialSpread) {
  const auto t = arrival_times(20001, 50, 1, 1);
  EXPECT_EQ(t.front(), 0);
  for (size_t i = 1; i < t.size(); ++i) ASSERT_GE(t[i], t[i - 1]);
  const GapStats s = gaps(t);
  EXPECT_NEAR(s.mean, 1.0 / 50, 0.02 / 50 * 3);  // ~3 standard errors
  EXPECT_NEAR(s.cv, 1.0, 0.05);
}

TEST(Arrivals, BurstinessShapesTheGaps) {
  // Gamma(shape k): coefficient of variation 1/sqrt(k), mean unchanged.
  const GapStats bursty = gaps(arrival_times(20001, 10, 0.25, 3));
  const GapStats even = gaps(arrival_times(20001, 10, 4, 3));
  EXPECT_NEAR(bursty.mean, 0.1, 0.01);
  EXPECT_NEAR(even.mean, 0.1, 0.005);
  EXPECT_NEAR(bursty.cv, 2.0, 0.15);
  EXPECT_NEAR(even.cv, 0.5, 0.03);
}

TEST(Arrivals, SeededAndValidated) {
  EXPECT_EQ(arrival_times(100, 5, 1, 42), arrival_times(100, 5, 1, 42));
  EXPECT_NE(arrival_times(100, 5, 1, 42), arrival_times(100, 5, 1, 43));
  EXPECT_THROW(arrival_times(10, 0, 1, 0), std::invalid_argument);
  EXPECT_THROW(arrival_times(10, 5, 0, 0), std::invalid_argument);
}

}  // namespace
}  // namespace pagoda::bench
