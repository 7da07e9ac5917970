// How long an engine step takes, learned online from the engine's own steps (issue 17's step-time model):
//   seconds ~ base + a * prefill tokens + b * decode sequences + c * KV tokens the decodes read
//                  + d * (prefill query, key) pairs
// fitted by recursive least squares with exponential forgetting (the last few hundred steps weigh most), so
// it follows the backend it runs on and a change of load. A scheduler can ask what a planned step would cost
// (predict); /metrics shows the terms and how far the predictions have been off.
#pragma once

#include <array>
#include <cstdint>

namespace pagoda {

// What a step computes, as the model sees it.
struct StepShape {
  int64_t prefill_tokens = 0;   // tokens of prompt chunks
  int64_t decode_seqs = 0;      // sequences computing one new token
  int64_t decode_kv_tokens = 0; // KV entries the decode sequences' attention reads (their contexts)
  int64_t prefill_pairs = 0;    // (query, key) pairs of the prompt chunks' causal attention
};

class StepTimeModel {
 public:
  static constexpr int kTerms = 5;  // base, prefill tokens, decode sequences, decode KV tokens, prefill pairs

  struct Snapshot {
    // Seconds per unit of each term: the step's base cost, per prefill token, per decode sequence, per KV
    // token a decode reads, per prefill (query, key) pair.
    std::array<double, kTerms> seconds_per_unit{};
    double relative_error = 0;  // moving average of |predicted - measured| / measured, before each update
    int64_t num_steps = 0;      // steps learned from
  };

  // `forgetting`: each older step weighs this much less (0.995: about the last 200 steps count).
  explicit StepTimeModel(double forgetting = 0.995);

  // Predicted seconds of a step of this shape (0 before any step was seen).
  double predict(const StepShape& shape) const;
  // Learns from one measured step.
  void update(const StepShape& shape, double seconds);
  Snapshot snapshot() const;

 private:
  using Vector = std::array<double, kTerms>;
  static Vector features(const StepShape& shape);

  double forgetting_;
  Vector theta_{};                             // coefficients, in milliseconds per scaled unit
  std::array<Vector, kTerms> covariance_{};    // P of recursive least squares
  double relative_error_ = 0;
  int64_t num_steps_ = 0;
};

}  // namespace pagoda
