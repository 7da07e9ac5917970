// The AWQ searches. Candidate evaluations are independent, but they run one after the other: each already
// spreads its products over the cores, and the order of the comparisons then matches AutoAWQ's.
#include "pagoda/quantize/awq_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "pagoda/quantize/rtn.h"

namespace pagoda::quantizer {
namespace {

// Per input channel: mean over the group's rows of |w| / max|w| of its quantization group (AutoAWQ w_mean).
std::vector<float> weight_channel_means(const std::vector<const Matrix*>& weights, int64_t group_size) {
  const int64_t k = weights[0]->cols;
  std::vector<double> sum(static_cast<size_t>(k), 0.0);
  int64_t rows = 0;
  for (const Matrix* w : weights) {
    for (int64_t r = 0; r < w->rows; ++r)
      for (int64_t g = 0; g < k / group_size; ++g) {
        const float* x = w->row(r) + g * group_size;
        float mx = 0.0f;
        for (int64_t j = 0; j < group_size; ++j) mx = std::max(mx, std::fabs(x[j]));
        for (int64_t j = 0; j < group_size; ++j) sum[g * group_size + j] += std::fabs(x[j]) / (mx + 1e-6f);
      }
    rows += w->rows;
  }
  std::vector<float> mean(static_cast<size_t>(k));
  for (int64_t c = 0; c < k; ++c) mean[c] = static_cast<float>(sum[c] / static_cast<double>(rows));
  return mean;
}

// Per input channel: mean |x| over the tokens (AutoAWQ x_mean).
std::vector<float> input_channel_means(const Matrix& x) {
  std::vector<double> sum(static_cast<size_t>(x.cols), 0.0);
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t c = 0; c < x.cols; ++c) sum[c] += std::fabs(x.at(r, c));
  std::vector<float> mean(static_cast<size_t>(x.cols));
  for (int64_t c = 0; c < x.cols; ++c) mean[c] = static_cast<float>(sum[c] / static_cast<double>(x.rows));
  return mean;
}

std::vector<float> candidate_scales(const std::vector<float>& x_mean, const std::vector<float>& w_mean, float ratio,
                                    bool duo) {
  std::vector<float> s(x_mean.size());
  for (size_t c = 0; c < s.size(); ++c) {
    const float v = duo ? std::pow(x_mean[c], ratio) / (std::pow(w_mean[c], 1.0f - ratio) + 1e-4f)
                        : std::pow(x_mean[c], ratio);
    s[c] = std::max(v, 1e-4f);
  }
  const auto [mn, mx] = std::minmax_element(s.begin(), s.end());
  const float norm = std::sqrt(*mx * *mn);
  for (float& v : s) {
    v /= norm;
    if (!std::isfinite(v)) v = 1.0f;  // AutoAWQ: inf and nan scales become 1
  }
  return s;
}

}  // namespace

double mean_squared_error(const Matrix& a, const Matrix& b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    const double d = static_cast<double>(a.data[i]) - static_cast<double>(b.data[i]);
    sum += d * d;
  }
  return a.data.empty() ? 0.0 : sum / static_cast<double>(a.data.size());
}

Matrix scaled_fake_quant(const Matrix& w, const std::vector<float>& scales, int64_t group_size) {
  Matrix out = w;
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c) out.at(r, c) *= scales[c];
  fake_quantize_asym_groups(out.data.data(), out.rows, out.cols, group_size);
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c) out.at(r, c) /= scales[c];
  return out;
}

ScaleSearchResult search_best_scales(const std::vector<const Matrix*>& weights, const Matrix& x,
                                     const Matrix& reference, const GroupForward& forward,
                                     const AwqSearchOptions& options) {
  const std::vector<float> w_mean = weight_channel_means(weights, options.group_size);
  const std::vector<float> x_mean = input_channel_means(x);
  auto evaluate = [&](const std::vector<float>& scales) {
    std::vector<Matrix> candidates;
    for (const Matrix* w : weights) candidates.push_back(scaled_fake_quant(*w, scales, options.group_size));
    return mean_squared_error(reference, forward(candidates));
  };
  ScaleSearchResult result;
  result.mse_rtn = evaluate(std::vector<float>(x_mean.size(), 1.0f));
  result.mse_best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < options.scale_grid; ++i) {
    const float ratio = static_cast<float>(i) / static_cast<float>(options.scale_grid);
    std::vector<float> scales = candidate_scales(x_mean, w_mean, ratio, options.duo_scaling);
    const double loss = evaluate(scales);
    if (loss < result.mse_best) {
      result.mse_best = loss;
      result.best_ratio = ratio;
      result.scales = std::move(scales);
    }
  }
  if (result.scales.empty()) result.scales.assign(x_mean.size(), 1.0f);  // every loss was NaN: no scaling
  return result;
}

std::vector<float> search_best_clip(const Matrix& w, const Matrix& x, const AwqSearchOptions& options) {
  const int64_t g_size = options.group_size, groups = w.cols / g_size;
  const int64_t step = std::max<int64_t>(1, x.rows / options.clip_samples);
  std::vector<int64_t> sample_rows;
  for (int64_t r = 0; r < x.rows; r += step) sample_rows.push_back(r);
  const int64_t t_count = static_cast<int64_t>(sample_rows.size());
  const int shrink_steps = static_cast<int>(options.max_shrink * static_cast<float>(options.clip_grid));
  std::vector<float> best(static_cast<size_t>(w.rows * groups));
#pragma omp parallel for schedule(dynamic)
  for (int64_t r = 0; r < w.rows; ++r) {
    std::vector<float> org_out(static_cast<size_t>(t_count)), cur(static_cast<size_t>(g_size));
    for (int64_t g = 0; g < groups; ++g) {
      const float* wg = w.row(r) + g * g_size;
      float org_max = 0.0f;
      for (int64_t j = 0; j < g_size; ++j) org_max = std::max(org_max, std::fabs(wg[j]));
      for (int64_t t = 0; t < t_count; ++t) {
        const float* xg = x.row(sample_rows[t]) + g * g_size;
        float dot = 0.0f;
        for (int64_t j = 0; j < g_size; ++j) dot += xg[j] * wg[j];
        org_out[t] = dot;
      }
      float best_max = org_max;
      double min_err = 1e9;
      for (int i = 0; i < shrink_steps; ++i) {
        const float max_val = org_max * (1.0f - static_cast<float>(i) / static_cast<float>(options.clip_grid));
        for (int64_t j = 0; j < g_size; ++j) cur[j] = std::clamp(wg[j], -max_val, max_val);
        fake_quantize_asym_groups(cur.data(), 1, g_size, g_size);
        double err = 0.0;
        for (int64_t t = 0; t < t_count; ++t) {
          const float* xg = x.row(sample_rows[t]) + g * g_size;
          float dot = 0.0f;
          for (int64_t j = 0; j < g_size; ++j) dot += xg[j] * cur[j];
          const double d = static_cast<double>(dot) - org_out[t];
          err += d * d;
        }
        err /= static_cast<double>(t_count);
        if (err < min_err) {
          min_err = err;
          best_max = max_val;
        }
      }
      best[r * groups + g] = best_max;
    }
  }
  return best;
}

void apply_clip(Matrix& w, const std::vector<float>& max_val, int64_t group_size) {
  const int64_t groups = w.cols / group_size;
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c) {
      const float m = max_val[r * groups + c / group_size];
      w.at(r, c) = std::clamp(w.at(r, c), -m, m);
    }
}

}  // namespace pagoda::quantizer
