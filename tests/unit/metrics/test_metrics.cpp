// Counters, gauges, histograms and the Prometheus text exposition.
#include <gtest/gtest.h>

#include "pagoda/metrics/metrics.h"

namespace pagoda::metrics {
namespace {

TEST(Metrics, CounterOnlyGoesUp) {
  Counter c;
  c.inc();
  c.inc(2.5);
  c.inc(-1);  // ignored
  EXPECT_DOUBLE_EQ(c.value(), 3.5);
  c.set_total(10);
  c.set_total(4);  // a mirrored total never goes down
  EXPECT_DOUBLE_EQ(c.value(), 10);
}

TEST(Metrics, GaugeGoesBothWays) {
  Gauge g;
  g.set(3);
  g.inc();
  g.dec(2);
  EXPECT_DOUBLE_EQ(g.value(), 2);
}

TEST(Metrics, HistogramBucketsAreCumulative) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.1);  // le is inclusive
  h.observe(0.5);
  h.observe(7);
  const auto s = h.snapshot();
  EXPECT_EQ(s.cumulative_counts, (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.sum, 7.65);
}

TEST(Metrics, RegistryReturnsTheSameSeries) {
  Registry r;
  Counter& a = r.counter("x_total", "help", {{"k", "v"}});
  Counter& b = r.counter("x_total", "help", {{"k", "v"}});
  Counter& c = r.counter("x_total", "help", {{"k", "w"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &c);
  EXPECT_THROW(r.gauge("x_total", "help"), std::invalid_argument);
}

TEST(Metrics, TextExposition) {
  Registry r;
  r.counter("pagoda:requests_total", "Requests.", {{"model_name", "m"}, {"reason", "stop"}}).inc(3);
  r.gauge("pagoda:running", "Running\nnow.", {{"model_name", "a\"b\\c"}}).set(0.25);
  r.histogram("pagoda:latency_seconds", "Latency.", {0.5, 1}, {{"model_name", "m"}}).observe(0.7);
  EXPECT_EQ(r.render(),
            "# HELP pagoda:requests_total Requests.\n"
            "# TYPE pagoda:requests_total counter\n"
            "pagoda:requests_total{model_name=\"m\",reason=\"stop\"} 3\n"
            "# HELP pagoda:running Running\\nnow.\n"
            "# TYPE pagoda:running gauge\n"
            "pagoda:running{model_name=\"a\\\"b\\\\c\"} 0.25\n"
            "# HELP pagoda:latency_seconds Latency.\n"
            "# TYPE pagoda:latency_seconds histogram\n"
            "pagoda:latency_seconds_bucket{model_name=\"m\",le=\"0.5\"} 0\n"
            "pagoda:latency_seconds_bucket{model_name=\"m\",le=\"1\"} 1\n"
            "pagoda:latency_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 1\n"
            "pagoda:latency_seconds_sum{model_name=\"m\"} 0.7\n"
            "pagoda:latency_seconds_count{model_name=\"m\"} 1\n");
}

TEST(Metrics, FormatValue) {
  EXPECT_EQ(format_value(0), "0");
  EXPECT_EQ(format_value(42), "42");
  EXPECT_EQ(format_value(0.001), "0.001");
  EXPECT_EQ(format_value(1.0 / 0.0), "+Inf");
}

}  // namespace
}  // namespace pagoda::metrics
