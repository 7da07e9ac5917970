// Binning request records over time.
#include "pagoda/bench/timeline.h"

#include <algorithm>
#include <cmath>

namespace pagoda::bench {

ThroughputTimeline throughput_timeline(const std::vector<RequestRecord>& records, double duration, double bin_seconds) {
  ThroughputTimeline t;
  t.bin_seconds = bin_seconds > 0 ? bin_seconds : 1;
  const size_t n = std::max<size_t>(1, static_cast<size_t>(std::ceil(duration / t.bin_seconds - 1e-9)));
  t.output_tokens_per_s.assign(n, 0);
  t.requests_running.assign(n, 0);
  t.completed_per_s.assign(n, 0);
  const auto bin = [&](double time) {
    return std::min(n - 1, static_cast<size_t>(std::max(0.0, time) / t.bin_seconds));
  };
  for (const RequestRecord& r : records) {
    const double start = r.send_time, end = r.send_time + r.e2el;
    for (size_t i = bin(start); i <= bin(end); ++i) {  // time in flight, per bin
      const double b0 = static_cast<double>(i) * t.bin_seconds, b1 = b0 + t.bin_seconds;
      const double overlap = std::min(end, b1) - std::max(start, b0);
      if (overlap > 0) t.requests_running[i] += overlap / t.bin_seconds;
    }
    if (!r.success) continue;
    t.completed_per_s[bin(end)] += 1 / t.bin_seconds;
    const double tokens = std::max(r.output_tokens, 0);
    if (r.num_chunks == 0) {
      t.output_tokens_per_s[bin(end)] += tokens / t.bin_seconds;
      continue;
    }
    const double per_chunk = tokens / r.num_chunks;
    double at = start + r.ttft;
    t.output_tokens_per_s[bin(at)] += per_chunk / t.bin_seconds;
    for (double gap : r.itl) {
      at += gap;
      t.output_tokens_per_s[bin(at)] += per_chunk / t.bin_seconds;
    }
  }
  return t;
}

}  // namespace pagoda::bench
