// GpuTimeline: the engine's per-step records (kept from the step observer, bounded) beside the GPU
// sampler's history, binned over time into a heatmap: GPU activity per metric, engine busy time and
// throughput, and the step batch composition (share of each bin's time spent in steps of each decode
// batch size and prefill size). Blank columns are idle time; the diagnosis of an idle GPU under mixed
// sequence lengths. Served as GET /debug/gpu_timeline and written by `pagoda serve --gpu-timeline-file`.
#pragma once

#include <chrono>
#include <vector>
#include <mutex>

#include "pagoda/engine/engine.h"
#include "pagoda/metrics/gpu_sampler.h"
#include "pagoda/metrics/heatmap.h"

namespace pagoda::server {

class GpuTimeline {
 public:
  using Clock = std::chrono::steady_clock;

  // `sampler` may be null or off: the GPU panel then says why. Times are seconds since construction.
  // The last `max_steps` steps are kept in a ring allocated (and touched) here, so that the server's
  // memory does not grow as steps accumulate: 200,000 steps (about 14 MB) is an hour at 55 steps a second.
  explicit GpuTimeline(const metrics::GpuSampler* sampler, size_t max_steps = 200000);

  void add_step(const StepRecord& step);  // thread-safe (the engine's step observer)
  size_t num_steps() const;
  // The steps held, oldest first.
  std::vector<StepRecord> steps() const;

  // The last `window_seconds` (0: all that is kept) in bins of `bin_seconds` (0: about 200 bins, at
  // least 10 ms). Throws std::invalid_argument for negative arguments or more than 2,000 bins.
  metrics::Heatmap heatmap(double window_seconds = 0, double bin_seconds = 0) const;

 private:
  const metrics::GpuSampler* sampler_;
  size_t max_steps_;
  Clock::time_point origin_;
  mutable std::mutex mutex_;
  std::vector<StepRecord> ring_;  // [max_steps]; the oldest at next_ once full
  size_t next_ = 0;               // where the next step goes
  size_t count_ = 0;              // steps held (at most max_steps)
};

}  // namespace pagoda::server
