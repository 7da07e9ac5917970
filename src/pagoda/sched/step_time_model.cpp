// Recursive least squares for the step-time model (step_time_model.h).
#include "pagoda/sched/step_time_model.h"

#include <algorithm>
#include <cmath>

namespace pagoda {

namespace {
// Features are scaled to comparable magnitudes (a step's counts run from 1 to millions), and times are fitted
// in milliseconds, which keeps the covariance well conditioned.
constexpr std::array<double, StepTimeModel::kTerms> kScale = {1.0, 1e-3, 1e-2, 1e-5, 1e-6};
constexpr double kInitialCovariance = 1e4;
// Without excitation (a term that stays constant) forgetting inflates the covariance without bound ("windup");
// it is scaled back when its trace passes this.
constexpr double kMaxCovarianceTrace = 1e6;
constexpr int kWarmUpSteps = 10;        // steps before predictions are scored
constexpr double kErrorSmoothing = 0.05;  // weight of the latest step in the moving average error
}  // namespace

StepTimeModel::StepTimeModel(double forgetting) : forgetting_(forgetting) {
  for (int i = 0; i < kTerms; ++i) covariance_[i][i] = kInitialCovariance;
}

StepTimeModel::Vector StepTimeModel::features(const StepShape& s) {
  const Vector raw = {1.0, static_cast<double>(s.prefill_tokens), static_cast<double>(s.decode_seqs),
                      static_cast<double>(s.decode_kv_tokens), static_cast<double>(s.prefill_pairs)};
  Vector x{};
  for (int i = 0; i < kTerms; ++i) x[i] = raw[i] * kScale[i];
  return x;
}

double StepTimeModel::predict(const StepShape& shape) const {
  if (num_steps_ == 0) return 0.0;
  const Vector x = features(shape);
  double ms = 0;
  for (int i = 0; i < kTerms; ++i) ms += theta_[i] * x[i];
  return std::max(ms, 0.0) * 1e-3;
}

void StepTimeModel::update(const StepShape& shape, double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds)) return;
  if (num_steps_ >= kWarmUpSteps) {
    const double err = std::fabs(predict(shape) - seconds) / seconds;
    relative_error_ = num_steps_ == kWarmUpSteps ? err : (1 - kErrorSmoothing) * relative_error_ + kErrorSmoothing * err;
  }
  const Vector x = features(shape);
  const double y = seconds * 1e3;
  Vector px{};  // P x
  for (int i = 0; i < kTerms; ++i)
    for (int j = 0; j < kTerms; ++j) px[i] += covariance_[i][j] * x[j];
  double denom = forgetting_;
  for (int i = 0; i < kTerms; ++i) denom += x[i] * px[i];
  double predicted = 0;
  for (int i = 0; i < kTerms; ++i) predicted += theta_[i] * x[i];
  const double residual = y - predicted;
  Vector gain{};
  for (int i = 0; i < kTerms; ++i) gain[i] = px[i] / denom;
  for (int i = 0; i < kTerms; ++i) theta_[i] += gain[i] * residual;
  // P = (P - k (P x)^T) / lambda, kept symmetric.
  double trace = 0;
  for (int i = 0; i < kTerms; ++i) {
    for (int j = 0; j < kTerms; ++j) covariance_[i][j] = (covariance_[i][j] - gain[i] * px[j]) / forgetting_;
  }
  for (int i = 0; i < kTerms; ++i) {
    for (int j = i + 1; j < kTerms; ++j) covariance_[i][j] = covariance_[j][i] = 0.5 * (covariance_[i][j] + covariance_[j][i]);
    trace += covariance_[i][i];
  }
  if (trace > kMaxCovarianceTrace) {
    for (auto& row : covariance_)
      for (double& v : row) v *= kMaxCovarianceTrace / trace;
  }
  ++num_steps_;
}

StepTimeModel::Snapshot StepTimeModel::snapshot() const {
  Snapshot s;
  for (int i = 0; i < kTerms; ++i) s.seconds_per_unit[i] = theta_[i] * kScale[i] * 1e-3;
  s.relative_error = relative_error_;
  s.num_steps = num_steps_;
  return s;
}

}  // namespace pagoda
