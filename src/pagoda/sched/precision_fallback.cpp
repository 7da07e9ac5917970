// LatencyWindow and PrecisionFallback (precision_fallback.h).
#include "pagoda/sched/precision_fallback.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pagoda {
namespace {

// Bins from 10 us to 1,000 s, each 2% wider than the one before; latencies outside go to the end bins.
constexpr double kMinLatency = 1e-5;
constexpr double kBinRatio = 1.02;
const double kLogRatio = std::log(kBinRatio);
const int kNumBins = static_cast<int>(std::ceil(std::log(1e3 / kMinLatency) / std::log(kBinRatio))) + 1;

}  // namespace

std::string_view weight_set_name(WeightSet set) { return set == WeightSet::kFallback ? "fallback" : "primary"; }

LatencyWindow::LatencyWindow(double window_s, int num_slices)
    : slice_s_(std::max(window_s, 1e-3) / std::max(num_slices, 1)),
      slices_(static_cast<size_t>(std::max(num_slices, 1)), std::vector<int64_t>(static_cast<size_t>(kNumBins), 0)),
      slice_index_(slices_.size(), -1),
      total_(static_cast<size_t>(kNumBins), 0) {}

int LatencyWindow::bin_of(double latency_s) {
  if (!(latency_s > kMinLatency)) return 0;  // NaN too
  return std::min(kNumBins - 1, static_cast<int>(std::log(latency_s / kMinLatency) / kLogRatio));
}

double LatencyWindow::bin_middle(int bin) { return kMinLatency * std::exp((bin + 0.5) * kLogRatio); }

void LatencyWindow::advance(int64_t slice) {
  if (slice <= latest_) return;  // time does not go back; a late sample counts in the latest slice
  const int64_t n = static_cast<int64_t>(slices_.size());
  for (size_t i = 0; i < slices_.size(); ++i) {
    if (slice_index_[i] < 0 || slice_index_[i] > slice - n) continue;
    for (size_t b = 0; b < total_.size(); ++b) {
      total_[b] -= slices_[i][b];
      total_count_ -= slices_[i][b];
      slices_[i][b] = 0;
    }
    slice_index_[i] = -1;
  }
  latest_ = slice;
}

void LatencyWindow::add(double now_s, double latency_s, int64_t count) {
  if (count <= 0) return;
  advance(static_cast<int64_t>(std::floor(now_s / slice_s_)));
  const size_t ring = static_cast<size_t>(latest_ % static_cast<int64_t>(slices_.size()));
  slice_index_[ring] = latest_;
  const size_t b = static_cast<size_t>(bin_of(latency_s));
  slices_[ring][b] += count;
  total_[b] += count;
  total_count_ += count;
}

int64_t LatencyWindow::count(double now_s) {
  advance(static_cast<int64_t>(std::floor(now_s / slice_s_)));
  return total_count_;
}

double LatencyWindow::quantile(double now_s, double q) {
  if (count(now_s) == 0) return 0;
  // The smallest bin whose cumulative count reaches q of the total.
  const double wanted = std::clamp(q, 0.0, 1.0) * static_cast<double>(total_count_);
  int64_t seen = 0;
  for (int b = 0; b < kNumBins; ++b) {
    seen += total_[static_cast<size_t>(b)];
    if (seen > 0 && static_cast<double>(seen) >= wanted) return bin_middle(b);
  }
  return bin_middle(kNumBins - 1);
}

void LatencyWindow::clear() {
  for (auto& s : slices_) std::fill(s.begin(), s.end(), 0);
  std::fill(slice_index_.begin(), slice_index_.end(), -1);
  std::fill(total_.begin(), total_.end(), 0);
  total_count_ = 0;
}

double predicted_prompt_load(const StepTimeModel& primary, const ArrivalRates& rates, double now_s,
                             const StepShape& decodes, int64_t max_chunk, double tpot_target_s, int64_t min_steps) {
  const double prompt = rates.mean_prompt_tokens();
  if (primary.snapshot().num_steps < min_steps || !(tpot_target_s > 0) || !(prompt > 0)) return -1;
  const double demand = rates.rate(now_s) * prompt;  // prompt tokens a second
  if (demand <= 0) return 0;
  const int64_t chunk = std::clamp<int64_t>(static_cast<int64_t>(prompt), 1, std::max<int64_t>(1, max_chunk));
  const StepShape alone{0, decodes.decode_seqs, decodes.decode_kv_tokens, 0};
  const StepShape with_chunk{chunk, decodes.decode_seqs, decodes.decode_kv_tokens, chunk * (chunk + 1) / 2};
  const double decode_s = std::max(primary.predict(alone), 0.0);
  const double per_token = std::max(primary.predict(with_chunk) - decode_s, 0.0) / static_cast<double>(chunk);
  const double left = 1.0 - decode_s / tpot_target_s;
  return left > 0 ? demand * per_token / left : std::numeric_limits<double>::infinity();
}

PrecisionFallback::PrecisionFallback(FallbackOptions options)
    : options_(options), window_(options.window_s), first_tokens_(options.window_s) {
  if (options_.min_dwell_s < 0) options_.min_dwell_s = options_.window_s / 4;
}

void PrecisionFallback::observe(double now_s, WeightSet set, double latency_s, double primary_ratio) {
  if (set != stats_.current) return;  // a step launched before the switch
  if (set == WeightSet::kPrimary) {
    window_.add(now_s, latency_s);
    return;
  }
  if (primary_ratio > 0) window_.add(now_s, latency_s * primary_ratio);
}

void PrecisionFallback::observe_first_token(double now_s, WeightSet set, double latency_s) {
  if (set == WeightSet::kPrimary && stats_.current == WeightSet::kPrimary && options_.ttft_target_s > 0)
    first_tokens_.add(now_s, latency_s);
}

void PrecisionFallback::observe_step(WeightSet set, double measured_s, double primary_predicted_s) {
  if (set != WeightSet::kFallback || stats_.current != WeightSet::kFallback || !(primary_predicted_s > 0) ||
      !(measured_s > 0))
    return;
  measured_s_ += measured_s;
  primary_predicted_s_ += primary_predicted_s;
  ++checked_steps_;
}

void PrecisionFallback::switch_to(WeightSet set, double now_s) {
  stats_.current = set;
  ++(set == WeightSet::kFallback ? stats_.switches_to_fallback : stats_.switches_to_primary);
  switched_at_s_ = now_s;
  window_.clear();
  first_tokens_.clear();
  measured_s_ = primary_predicted_s_ = 0;
  checked_steps_ = 0;
  if (set == WeightSet::kFallback) stats_.fallback_speedup = 0;  // the last episode's stays shown until the next
}

bool PrecisionFallback::update(double now_s) {
  stats_.window_count = window_.count(now_s);
  stats_.window_p99_s = window_.quantile(now_s, 0.99);
  stats_.first_token_count = first_tokens_.count(now_s);
  stats_.first_token_p99_s = first_tokens_.quantile(now_s, 0.99);
  if (options_.tpot_target_s <= 0) return false;
  if (stats_.current == WeightSet::kPrimary) {
    const bool tpot = stats_.window_count >= options_.min_samples && stats_.window_p99_s > options_.tpot_target_s;
    const bool ttft = options_.ttft_target_s > 0 && stats_.first_token_count >= options_.min_first_tokens &&
                      stats_.first_token_p99_s > options_.ttft_target_s;
    if ((!tpot && !ttft) || now_s < stats_.cooldown_until_s) return false;
    stats_.first_tokens_switched = !tpot;
    switch_to(WeightSet::kFallback, now_s);
    return true;
  }
  if (now_s - switched_at_s_ < options_.min_dwell_s) return false;
  // The measured check: the fallback's steps against what the primary's model says the same steps take.
  const bool checked = checked_steps_ >= kMinCheckSteps;
  if (checked) stats_.fallback_speedup = primary_predicted_s_ / measured_s_;
  if (checked && stats_.fallback_speedup <= 1.0) {
    ++stats_.switches_declined;
    const double cooldown = cooldown_s_ > 0 ? cooldown_s_ : options_.window_s;
    stats_.cooldown_until_s = now_s + cooldown;
    cooldown_s_ = std::min(2 * cooldown, kMaxCooldownWindows * options_.window_s);
    switch_to(WeightSet::kPrimary, now_s);
    return true;
  }
  if (stats_.window_count < options_.min_samples || stats_.window_p99_s > kRecoverFraction * options_.tpot_target_s)
    return false;
  if (options_.ttft_target_s > 0 && stats_.primary_load > kRecoverFraction) return false;
  cooldown_s_ = 0;  // this episode helped: a later decline starts from one window again
  switch_to(WeightSet::kPrimary, now_s);
  return true;
}

}  // namespace pagoda
