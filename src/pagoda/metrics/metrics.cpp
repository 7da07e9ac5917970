// Metric types and the Prometheus text exposition.
#include "pagoda/metrics/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <variant>

namespace pagoda::metrics {
namespace {

enum Type { kCounter = 0, kGauge = 1, kHistogram = 2 };
const char* type_name(int type) { return type == kCounter ? "counter" : type == kGauge ? "gauge" : "histogram"; }

void atomic_add(std::atomic<double>& a, double amount) {
  double old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, old + amount, std::memory_order_relaxed)) {
  }
}

std::string escape_help(const std::string& help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string label_text(const Labels& labels, const std::string& extra_name = "", const std::string& extra_value = "") {
  if (labels.empty() && extra_name.empty()) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ",";
    first = false;
    out += k + "=\"" + escape_label_value(v) + "\"";
  }
  if (!extra_name.empty()) {
    if (!first) out += ",";
    out += extra_name + "=\"" + extra_value + "\"";
  }
  return out + "}";
}

}  // namespace

std::string escape_label_value(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

void Counter::inc(double amount) {
  if (amount > 0) atomic_add(value_, amount);
}

void Counter::set_total(double total) {
  double old = value_.load(std::memory_order_relaxed);
  while (total > old && !value_.compare_exchange_weak(old, total, std::memory_order_relaxed)) {
  }
}

void Gauge::inc(double amount) { atomic_add(value_, amount); }

Histogram::Histogram(std::vector<double> upper_bounds) : upper_bounds_(std::move(upper_bounds)) {
  if (!std::is_sorted(upper_bounds_.begin(), upper_bounds_.end()))
    throw std::invalid_argument("histogram bounds must be sorted");
  counts_.assign(upper_bounds_.size() + 1, 0);
}

void Histogram::observe(double value) {
  const size_t bucket = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  std::lock_guard lock(mutex_);
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.upper_bounds = upper_bounds_;
  std::lock_guard lock(mutex_);
  uint64_t running = 0;
  for (uint64_t c : counts_) s.cumulative_counts.push_back(running += c);
  s.sum = sum_;
  s.count = count_;
  return s;
}

struct Registry::Family {
  std::string name, help;
  int type;
  std::vector<double> bounds;
  std::vector<std::pair<Labels, std::variant<std::unique_ptr<Counter>, std::unique_ptr<Gauge>, std::unique_ptr<Histogram>>>>
      series;
};

Registry::Registry() = default;
Registry::~Registry() = default;

Registry::Family& Registry::family(const std::string& name, const std::string& help, int type) {
  for (auto& f : families_) {
    if (f->name != name) continue;
    if (f->type != type) throw std::invalid_argument("metric " + name + " registered with two types");
    return *f;
  }
  families_.push_back(std::make_unique<Family>(Family{name, help, type, {}, {}}));
  return *families_.back();
}

Counter& Registry::counter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lock(mutex_);
  Family& f = family(name, help, kCounter);
  for (auto& [l, m] : f.series)
    if (l == labels) return *std::get<0>(m);
  f.series.emplace_back(labels, std::make_unique<Counter>());
  return *std::get<0>(f.series.back().second);
}

Gauge& Registry::gauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lock(mutex_);
  Family& f = family(name, help, kGauge);
  for (auto& [l, m] : f.series)
    if (l == labels) return *std::get<1>(m);
  f.series.emplace_back(labels, std::make_unique<Gauge>());
  return *std::get<1>(f.series.back().second);
}

Histogram& Registry::histogram(const std::string& name, const std::string& help, const std::vector<double>& bounds,
                               const Labels& labels) {
  std::lock_guard lock(mutex_);
  Family& f = family(name, help, kHistogram);
  for (auto& [l, m] : f.series)
    if (l == labels) return *std::get<2>(m);
  f.series.emplace_back(labels, std::make_unique<Histogram>(bounds));
  return *std::get<2>(f.series.back().second);
}

std::string Registry::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& f : families_) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", f->name, escape_help(f->help), f->name, type_name(f->type));
    for (const auto& [labels, m] : f->series) {
      if (f->type == kCounter) {
        out += f->name + label_text(labels) + " " + format_value(std::get<0>(m)->value()) + "\n";
      } else if (f->type == kGauge) {
        out += f->name + label_text(labels) + " " + format_value(std::get<1>(m)->value()) + "\n";
      } else {
        const Histogram::Snapshot s = std::get<2>(m)->snapshot();
        for (size_t i = 0; i < s.cumulative_counts.size(); ++i) {
          const std::string le = i < s.upper_bounds.size() ? format_value(s.upper_bounds[i]) : "+Inf";
          out += f->name + "_bucket" + label_text(labels, "le", le) + " " + std::to_string(s.cumulative_counts[i]) + "\n";
        }
        out += f->name + "_sum" + label_text(labels) + " " + format_value(s.sum) + "\n";
        out += f->name + "_count" + label_text(labels) + " " + std::to_string(s.count) + "\n";
      }
    }
  }
  return out;
}

}  // namespace pagoda::metrics
