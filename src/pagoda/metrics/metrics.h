// Prometheus-style metrics: counters, gauges and histograms with labels, kept in a Registry that renders
// the text exposition format (version 0.0.4). Every metric is thread-safe; observation is lock-free
// except for histograms, which take a short per-series lock.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace pagoda::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;  // name -> value, in exposition order

class Counter {
 public:
  void inc(double amount = 1.0);  // amount >= 0
  // For counters mirrored from a monotonic source (e.g. engine totals): never goes down.
  void set_total(double total);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void set(double value) { value_.store(value, std::memory_order_relaxed); }
  void inc(double amount = 1.0);
  void dec(double amount = 1.0) { inc(-amount); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // sorted, finite; +Inf is implicit
  void observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative_counts;  // one per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  std::vector<double> upper_bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Owns metric families. Getting a metric with a name and label set returns the same object every time;
// references stay valid for the registry's lifetime.
class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, const std::vector<double>& upper_bounds,
                       const Labels& labels = {});

  // The whole registry in Prometheus text format, families in registration order.
  std::string render() const;

 private:
  struct Family;
  Family& family(const std::string& name, const std::string& help, int type);
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Family>> families_;
};

// Helpers of the text format, exposed for tests.
std::string escape_label_value(const std::string& value);
std::string format_value(double value);

}  // namespace pagoda::metrics
