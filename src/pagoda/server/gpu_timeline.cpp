// Binning steps and GPU samples into the heatmap's rows.
#include "pagoda/server/gpu_timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

namespace pagoda::server {
namespace {

constexpr int kMaxHeatmapBins = 2000;  // the default is 200

using metrics::HeatmapPanel;
using metrics::HeatmapRow;
using metrics::TimeBins;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Power-of-two buckets for decode batch sizes: 0, 1, 2-3, 4-7, ...; key = lower bound.
int pow2_bucket(int n) {
  if (n <= 0) return 0;
  int b = 1;
  while (b * 2 <= n) b *= 2;
  return b;
}
std::string pow2_label(int lo) { return lo <= 1 ? std::to_string(lo) : fmt::format("{}-{}", lo, 2 * lo - 1); }

// Power-of-four buckets for prefill tokens: 0, 1-3, 4-15, 16-63, ...
int pow4_bucket(int n) {
  if (n <= 0) return 0;
  int b = 1;
  while (b * 4 <= n) b *= 4;
  return b;
}
std::string pow4_label(int lo) { return lo == 0 ? "0" : fmt::format("{}-{}", lo, 4 * lo - 1); }

// Mean of the values that fell in each bin; NaN where none did.
struct MeanRow {
  std::vector<double> sum, count;
  explicit MeanRow(int bins) : sum(static_cast<size_t>(bins), 0), count(static_cast<size_t>(bins), 0) {}
  void add(int bin, double v) {
    if (bin < 0) return;
    sum[static_cast<size_t>(bin)] += v;
    count[static_cast<size_t>(bin)] += 1;
  }
  std::vector<double> values() const {
    std::vector<double> out(sum.size(), kNaN);
    for (size_t i = 0; i < sum.size(); ++i)
      if (count[i] > 0) out[i] = sum[i] / count[i];
    return out;
  }
};

// Time-weighted mean over the bins each step's forward overlaps, so long steps fill every bin they span.
struct SpreadMean {
  std::vector<double> sum, weight;
  explicit SpreadMean(int bins) : sum(static_cast<size_t>(bins), 0), weight(static_cast<size_t>(bins), 0) {}
  void add(const TimeBins& bins, double t0, double t1, double v) {
    const double w = std::max(t1 - t0, 1e-9);
    bins.spread(sum, t0, t0 + w, v * w);
    bins.spread(weight, t0, t0 + w, w);
  }
  std::vector<double> values() const {
    std::vector<double> out(sum.size(), kNaN);
    for (size_t i = 0; i < sum.size(); ++i)
      if (weight[i] > 0) out[i] = sum[i] / weight[i];
    return out;
  }
};

std::vector<double> scaled(std::vector<double> v, double factor) {
  for (double& x : v) x *= factor;
  return v;
}

}  // namespace

GpuTimeline::GpuTimeline(const metrics::GpuSampler* sampler, size_t max_steps)
    : sampler_(sampler), max_steps_(std::max<size_t>(max_steps, 1)), origin_(Clock::now()), ring_(max_steps_) {}

void GpuTimeline::add_step(const StepRecord& step) {
  std::lock_guard lock(mutex_);
  ring_[next_] = step;
  next_ = (next_ + 1) % max_steps_;
  count_ = std::min(count_ + 1, max_steps_);
}

size_t GpuTimeline::num_steps() const {
  std::lock_guard lock(mutex_);
  return count_;
}

std::vector<StepRecord> GpuTimeline::steps() const {
  std::lock_guard lock(mutex_);
  std::vector<StepRecord> out;
  out.reserve(count_);
  const size_t oldest = count_ < max_steps_ ? 0 : next_;
  for (size_t i = 0; i < count_; ++i) out.push_back(ring_[(oldest + i) % max_steps_]);
  return out;
}

metrics::Heatmap GpuTimeline::heatmap(double window_seconds, double bin_seconds) const {
  if (window_seconds < 0 || bin_seconds < 0) throw std::invalid_argument("window and bin must not be negative");
  const auto secs = [&](Clock::time_point t) { return std::chrono::duration<double>(t - origin_).count(); };
  const double now = secs(Clock::now());
  const std::vector<StepRecord> steps = this->steps();
  std::vector<metrics::GpuSample> samples;
  if (sampler_ && sampler_->enabled()) samples = sampler_->samples_since(origin_);
  double start = 0;
  if (window_seconds > 0) {
    start = std::max(0.0, now - window_seconds);
  } else {
    double first = now;
    if (!steps.empty()) first = std::min(first, secs(steps.front().start));
    if (!samples.empty()) first = std::min(first, secs(samples.front().time));
    start = first;
  }
  const double span = std::max(now - start, 1e-3);
  if (bin_seconds == 0) bin_seconds = std::max(0.01, span / 200);
  // The SVG grows with the bins (about 1.6 kB each): a bound keeps one request from building a huge image.
  if (span / bin_seconds > kMaxHeatmapBins)
    throw std::invalid_argument(fmt::format("more than {} bins: use wider bins or a shorter window", kMaxHeatmapBins));
  TimeBins bins{start, bin_seconds, std::max(1, static_cast<int>(std::ceil(span / bin_seconds)))};
  const int n = bins.count;
  const auto zeros = [n] { return std::vector<double>(static_cast<size_t>(n), 0.0); };

  metrics::Heatmap h;
  h.title = fmt::format("Pagoda GPU timeline: {} steps, {} GPU samples (seconds since the server started)",
                        steps.size(), samples.size());
  h.bin_seconds = bin_seconds;
  h.start_seconds = start;
  h.num_bins = n;

  // GPU, per device.
  if (!sampler_ || !sampler_->enabled()) {
    h.panels.push_back(HeatmapPanel{"GPU (NVML)", sampler_ ? "sampler " + sampler_->status() : "sampler not started", {}});
  }
  if (sampler_ && sampler_->enabled()) {
    const std::vector<std::string> names = sampler_->device_names();
    for (size_t d = 0; d < sampler_->devices().size(); ++d) {
      const int device = sampler_->devices()[d];
      MeanRow sm(n), bw(n), mem(n), power(n), clock(n);
      double power_limit = 0, clock_max = 0, mem_total = 0;
      for (const metrics::GpuSample& s : samples) {
        if (s.device != device) continue;
        const int b = bins.index(secs(s.time));
        sm.add(b, 100 * s.sm_util);
        bw.add(b, 100 * s.mem_bw_util);
        mem.add(b, s.memory_used_bytes / (1 << 30));
        power.add(b, s.power_watts);
        clock.add(b, s.sm_clock_mhz);
        power_limit = std::max(power_limit, s.power_limit_watts);
        clock_max = std::max(clock_max, s.sm_clock_max_mhz);
        mem_total = std::max(mem_total, s.memory_total_bytes / (1 << 30));
      }
      HeatmapPanel p{fmt::format("GPU {} ({})", device, d < names.size() ? names[d] : "?"),
                     "NVML: kernel-active and memory-active shares of its sample period", {}};
      p.rows.push_back(HeatmapRow{"SM active", "%", sm.values(), 100});
      p.rows.push_back(HeatmapRow{"memory bandwidth active", "%", bw.values(), 100});
      p.rows.push_back(HeatmapRow{"memory used", "GiB", mem.values(), mem_total});
      p.rows.push_back(HeatmapRow{"power", "W", power.values(), power_limit});
      p.rows.push_back(HeatmapRow{"SM clock", "MHz", clock.values(), clock_max});
      h.panels.push_back(std::move(p));
    }
  }

  // Engine steps.
  std::vector<double> busy = zeros(), num_steps = zeros(), prefill = zeros(), decode = zeros();
  SpreadMean decode_batch(n), seqs(n), padding(n), eager(n), fallback(n);
  bool any_fallback = false;
  std::map<int, std::vector<double>> by_decode, by_prefill;  // bucket -> forward seconds per bin
  for (const StepRecord& s : steps) {
    const double t0 = secs(s.start) + s.schedule_seconds + s.queued_seconds, t1 = t0 + s.execute_seconds;
    if (t1 < start) continue;
    const int b = bins.index(t0);
    bins.spread(busy, t0, t1, s.execute_seconds);
    if (b >= 0) num_steps[static_cast<size_t>(b)] += 1;
    bins.spread(prefill, t0, t1, s.prefill_tokens);
    bins.spread(decode, t0, t1, s.decode_seqs);
    decode_batch.add(bins, t0, t1, s.decode_seqs);
    seqs.add(bins, t0, t1, s.num_seqs);
    eager.add(bins, t0, t1, s.graph_batch_size == 0 ? 100 : 0);
    fallback.add(bins, t0, t1, s.weights == WeightSet::kFallback ? 100 : 0);
    any_fallback = any_fallback || s.weights == WeightSet::kFallback;
    if (s.graph_batch_size > 0)
      padding.add(bins, t0, t1, 100.0 * (s.graph_batch_size - s.decode_seqs) / s.graph_batch_size);
    auto& d = by_decode.try_emplace(pow2_bucket(s.decode_seqs), zeros()).first->second;
    bins.spread(d, t0, t1, s.execute_seconds);
    auto& p = by_prefill.try_emplace(pow4_bucket(s.prefill_tokens), zeros()).first->second;
    bins.spread(p, t0, t1, s.execute_seconds);
  }
  const double per_second = 1.0 / bin_seconds;
  HeatmapPanel engine{"Engine steps", steps.empty() ? "no steps in this window" : "busy = forward + sampling time", {}};
  engine.rows.push_back(HeatmapRow{"busy", "%", scaled(busy, 100 * per_second), 100});
  engine.rows.push_back(HeatmapRow{"steps", "/s", scaled(num_steps, per_second), 0});
  engine.rows.push_back(HeatmapRow{"prefill tokens", "tok/s", scaled(prefill, per_second), 0});
  engine.rows.push_back(HeatmapRow{"decode tokens", "tok/s", scaled(decode, per_second), 0});
  engine.rows.push_back(HeatmapRow{"decode batch (mean)", "seqs", decode_batch.values(), 0});
  engine.rows.push_back(HeatmapRow{"sequences per step (mean)", "seqs", seqs.values(), 0});
  engine.rows.push_back(HeatmapRow{"eager steps", "%", eager.values(), 100});
  engine.rows.push_back(HeatmapRow{"CUDA graph padding", "%", padding.values(), 100});
  // The precision fallback's switches: the share of steps on the fallback weights (a row only once there were any).
  if (any_fallback) engine.rows.push_back(HeatmapRow{"steps on fallback weights", "%", fallback.values(), 100});
  h.panels.push_back(std::move(engine));

  HeatmapPanel composition{"Step batch composition: share of time in steps with N decode sequences", "", {}};
  for (auto& [lo, row] : by_decode)
    composition.rows.push_back(HeatmapRow{"decode " + pow2_label(lo), "%", scaled(row, 100 * per_second), 100});
  h.panels.push_back(std::move(composition));
  HeatmapPanel prefill_mix{"Step batch composition: share of time in steps with N prefill tokens", "", {}};
  for (auto& [lo, row] : by_prefill)
    prefill_mix.rows.push_back(HeatmapRow{"prefill " + pow4_label(lo), "%", scaled(row, 100 * per_second), 100});
  h.panels.push_back(std::move(prefill_mix));
  return h;
}

}  // namespace pagoda::server
