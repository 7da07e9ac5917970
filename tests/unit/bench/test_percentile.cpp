// Percentiles against numpy.percentile (default linear method); reference values computed with
// numpy 1.24: np.percentile([3.1, 0.2, 7.7, 1.5, 9.0, 4.4, 2.25], q), np.mean, np.std.
#include <gtest/gtest.h>

#include <stdexcept>

#include "pagoda/bench/percentile.h"

namespace pagoda::bench {
namespace {

const std::vector<double> kValues = {3.1, 0.2, 7.7, 1.5, 9.0, 4.4, 2.25};

TEST(Percentile, MatchesNumpyLinear) {
  const std::vector<std::pair<double, double>> expected = {
      {0, 0.2},   {1, 0.278}, {10, 0.98},   {25, 1.875},    {50, 3.1},
      {90, 8.22}, {95, 8.61}, {99, 8.922}, {99.9, 8.9922}, {100, 9.0}};
  for (const auto& [q, want] : expected) EXPECT_NEAR(percentile(kValues, q), want, 1e-12) << "q=" << q;
}

TEST(Percentile, OneToHundred) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);  // unsorted input
  EXPECT_NEAR(percentile(v, 90), 90.1, 1e-12);
  EXPECT_NEAR(percentile(v, 99), 99.01, 1e-12);
  EXPECT_NEAR(percentile(v, 33.3), 33.967, 1e-12);
}

TEST(Percentile, SingleValueAndBadInput) {
  EXPECT_EQ(percentile({5.0}, 0), 5.0);
  EXPECT_EQ(percentile({5.0}, 99), 5.0);
  EXPECT_THROW(percentile({}, 50), std::invalid_argument);
  EXPECT_THROW(percentile({1.0}, 101), std::invalid_argument);
  EXPECT_THROW(percentile({1.0}, -1), std::invalid_argument);
}

TEST(Percentile, DescribeMeanMedianStd) {
  const Distribution d = describe(kValues, {90, 99});
  EXPECT_EQ(d.count, 7u);
  EXPECT_NEAR(d.mean, 4.021428571428571, 1e-12);
  EXPECT_NEAR(d.std, 3.0097291219900675, 1e-12);  // population (ddof = 0)
  EXPECT_NEAR(d.median, 3.1, 1e-12);
  EXPECT_EQ(d.min, 0.2);
  EXPECT_EQ(d.max, 9.0);
  ASSERT_EQ(d.percentiles.size(), 2u);
  EXPECT_NEAR(d.percentiles[0].second, 8.22, 1e-12);
  EXPECT_NEAR(d.percentiles[1].second, 8.922, 1e-12);
}

TEST(Percentile, DescribeNothingIsZero) {
  const Distribution d = describe({}, {99});
  EXPECT_EQ(d.count, 0u);
  EXPECT_EQ(d.mean, 0);
  EXPECT_EQ(d.percentiles.at(0).second, 0);
}

}  // namespace
}  // namespace pagoda::bench
