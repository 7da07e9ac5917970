// Arrival times: all at once for inf, gamma gaps with the requested mean and spread, seeded.
#include <gtest/gtest.h>

#include <algorithm>
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

namespace pagoda::bench {
namespace {

TEST(RateSchedule, ParsesPiecesAndRefusesBadOnes) {
  const std::vector<RatePhase> s = parse_rate_schedule("4:20,32.5:10,4:5");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[1].rate, 32.5);
  EXPECT_EQ(s[1].seconds, 10);
  for (const char* bad : {"", "4", "4:", ":5", "4:20,", "0:5", "4:-1", "inf:5", "4:20x", "a:b"})
    EXPECT_THROW(parse_rate_schedule(bad), std::invalid_argument) << bad;
  EXPECT_EQ(phase_of(s, 0), 0u);
  EXPECT_EQ(phase_of(s, 20), 1u);
  EXPECT_EQ(phase_of(s, 29.9), 1u);
  EXPECT_EQ(phase_of(s, 1000), 2u);  // past the end: the last phase
}

TEST(RateSchedule, EachPhaseHasItsRate) {
  const std::vector<RatePhase> s = parse_rate_schedule("5:100,50:100,5:100");
  const std::vector<double> t = arrival_times(20000, s, 1.0, 3);
  int counts[3] = {0, 0, 0};
  for (double x : t)
    if (x < 300) ++counts[phase_of(s, x)];
  EXPECT_NEAR(counts[0], 500, 5 * std::sqrt(500.0));
  EXPECT_NEAR(counts[1], 5000, 5 * std::sqrt(5000.0));
  EXPECT_NEAR(counts[2], 500, 5 * std::sqrt(500.0));
  EXPECT_TRUE(std::is_sorted(t.begin(), t.end()));
  EXPECT_EQ(t, arrival_times(20000, s, 1.0, 3)) << "seeded";
  EXPECT_GT(t.back(), 300) << "past the schedule, the last phase's rate goes on";
}

}  // namespace
}  // namespace pagoda::bench
