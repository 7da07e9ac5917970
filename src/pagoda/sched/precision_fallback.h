// Automatic precision fallback (issue 17, `--fallback-quantization`): the engine holds two weight sets of one
// model, the served one (primary) and a quantized copy (fallback), and runs each step on one of them. The rule,
// in full (docs/ARCHITECTURE.md repeats it):
//
//   on the primary set   switch to the fallback when the P99 of the output tokens' TPOT (each token's request's
//                        time per output token so far, the SLO's measure) observed since the last switch, over
//                        the sliding window (--fallback-window-s), exceeds --slo-tpot-ms, or
//                        (with --slo-ttft-ms) when the P99 of the first-token latencies does that target;
//   on the fallback set  switch back when the P99 of what the inter-token latencies would have been on the
//                        primary set (each one scaled by the step-time models' primary / fallback prediction for
//                        the step that produced it) is at most kRecoverFraction of the target, and (with --slo-ttft-ms)
//                        the primary's prompt load is at most kRecoverFraction, after at least min_dwell_s on the
//                        fallback. The prompt load is the engine's prediction (observe_load): the prompt tokens
//                        arriving per second times the primary's time per prompt token, over the share of each
//                        step the decodes leave at the TPOT target's pace (above 1: prompts arrive faster than
//                        the primary set can take them without slowing the decodes, so first tokens come late).
//
//   and, measured: on the fallback, switch back at once ("declined") when, after min_dwell_s and at least
//                  kMinCheckSteps steps, the fallback's steps took at least as long in all as the primary's
//                  step-time model predicts for the same steps: the fallback is not the faster set at this
//                  load (weight-only int8 / w4 at large batches on the GPU). The primary then stays for a
//                  cool-down (window_s, doubling with each consecutive decline up to kMaxCooldownWindows
//                  windows; reset by a fallback episode that helped).
//
// A window is judged only once it holds min_samples latencies, and it starts empty at each switch: latencies
// of the other precision say nothing about this one. Going back is judged on a prediction of the primary set
// at the load the fallback is serving, not on the fallback's own latencies, which are low precisely because
// it is the faster set: that is the hysteresis that keeps a steady load from flapping between the two (and for
// first tokens, whose latency is mostly queueing, the prompt load stands in for that prediction). The
// measured check guards that prediction: it compares the fallback's measured step times with the primary
// model, which has learned from every step before the switch, over the same steps (so a load that grows
// after the switch does not count against the fallback, as comparing the fallback's latencies with the
// primary's before the switch did), and does not use the fallback's own model, fit on few steps of one shape.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "pagoda/sched/arrival_rate.h"
#include "pagoda/sched/step_time_model.h"

namespace pagoda {

// Which weights a step runs on.
enum class WeightSet : uint8_t { kPrimary, kFallback };
std::string_view weight_set_name(WeightSet set);  // "primary", "fallback"

// Latencies of the last `window_s` seconds as a histogram of log-spaced bins (2% wide), kept per slice of
// time so that old slices drop out: quantiles in O(bins) whatever the token rate, memory fixed.
class LatencyWindow {
 public:
  explicit LatencyWindow(double window_s, int num_slices = 30);

  void add(double now_s, double latency_s, int64_t count = 1);
  // The q-quantile (0..1) of the latencies held at `now_s` (a bin's geometric middle); 0 when empty.
  double quantile(double now_s, double q);
  int64_t count(double now_s);
  void clear();

 private:
  void advance(int64_t slice);  // drops the slices that left the window by `slice`
  static int bin_of(double latency_s);
  static double bin_middle(int bin);

  double slice_s_;
  std::vector<std::vector<int64_t>> slices_;  // [num_slices][bins]: a ring
  std::vector<int64_t> slice_index_;          // which time slice each ring entry holds; -1: none
  std::vector<int64_t> total_;                // [bins]: the sum of the ring
  int64_t total_count_ = 0;
  int64_t latest_ = -1;  // the latest slice seen
};

struct FallbackOptions {
  double tpot_target_s = 0;  // --slo-tpot-ms (required)
  double ttft_target_s = 0;  // --slo-ttft-ms: first tokens watched too; 0: not
  double window_s = 60;      // --fallback-window-s
  int64_t min_samples = 64;  // inter-token latencies a window needs before it is judged
  int64_t min_first_tokens = 16;  // first-token latencies a window needs before it is judged
  double min_dwell_s = -1;   // time on the fallback before going back is considered; < 0: window_s / 4
};

struct FallbackStats {
  WeightSet current = WeightSet::kPrimary;
  uint64_t switches_to_fallback = 0;
  uint64_t switches_to_primary = 0;
  uint64_t switches_declined = 0;  // of switches_to_primary: fallbacks measured no faster (the measured check)
  double window_p99_s = 0;  // the P99 being judged: observed on the primary, predicted for the primary on the fallback
  int64_t window_count = 0;
  double first_token_p99_s = 0;  // of the first tokens observed on the primary in the window (--slo-ttft-ms)
  int64_t first_token_count = 0;
  double primary_load = -1;  // the primary's predicted prompt load (observe_load); < 0: not known
  bool first_tokens_switched = false;  // the latest switch to the fallback came from first tokens, not TPOT
  // On the fallback: the primary model's predicted time for the fallback's steps over their measured time (above
  // 1: the fallback is faster); 0 before kMinCheckSteps steps.
  double fallback_speedup = 0;
  double cooldown_until_s = 0;  // after a decline: no switch to the fallback before this time
};

// The primary set's prompt load (PrecisionFallback::observe_load) at `now_s`: prompt tokens arriving per second
// (`rates`) times the primary model's time per prompt token (a mean prompt's chunk, at most `max_chunk`, beside the
// step's decodes, less the decodes alone), over the share of a step at the TPOT target's pace that those decodes
// leave. Steps at that pace run 1 / target a second, each paying for the decodes, so the primary takes the prompts
// without slowing the decodes while this is at most 1. < 0 while the model has learned fewer than `min_steps`.
double predicted_prompt_load(const StepTimeModel& primary, const ArrivalRates& rates, double now_s,
                             const StepShape& decodes, int64_t max_chunk, double tpot_target_s, int64_t min_steps);

class PrecisionFallback {
 public:
  static constexpr double kRecoverFraction = 0.8;
  static constexpr int kMaxCooldownWindows = 8;
  static constexpr int64_t kMinCheckSteps = 32;

  explicit PrecisionFallback(FallbackOptions options);

  WeightSet current() const { return stats_.current; }
  // One output token (a request's second or later), observed at `now_s` after a step on `set`. On the primary set
  // `latency_s` is its request's time per output token so far (the mean inter-token time since its first token: the
  // batch controller lets a step run past the target when a request's earlier steps left time for it, and such a
  // step is no miss); on the fallback, the token's own inter-token latency, and `primary_ratio` the step-time
  // models' predicted primary / fallback time for its step (0 when a model cannot tell yet: not counted).
  void observe(double now_s, WeightSet set, double latency_s, double primary_ratio);
  // One request's first-token latency (arrival to first token), observed at `now_s` after a step on `set`; counted
  // on the primary set only (on the fallback, going back is judged on the prompt load).
  void observe_first_token(double now_s, WeightSet set, double latency_s);
  // The primary set's prompt load as the engine predicts it now (see the rule above); < 0: it cannot tell yet.
  void observe_load(double primary_load) { stats_.primary_load = primary_load; }
  // One step run on `set`: its measured seconds and the primary step-time model's prediction for its shape
  // (0 when the model cannot tell yet: not counted). On the fallback these feed the measured check.
  void observe_step(WeightSet set, double measured_s, double primary_predicted_s);
  // Applies the rule at `now_s`; true when the current set changed.
  bool update(double now_s);
  FallbackStats stats() const { return stats_; }
  const FallbackOptions& options() const { return options_; }

 private:
  void switch_to(WeightSet set, double now_s);

  FallbackOptions options_;
  LatencyWindow window_;
  LatencyWindow first_tokens_;
  double switched_at_s_ = 0;
  // On the fallback since the switch: its steps' measured seconds, the primary model's for the same steps.
  double measured_s_ = 0, primary_predicted_s_ = 0;
  int64_t checked_steps_ = 0;
  double cooldown_s_ = 0;  // the next decline's cool-down; 0: window_s
  FallbackStats stats_;
};

}  // namespace pagoda
