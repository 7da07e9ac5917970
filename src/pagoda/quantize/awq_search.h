// AutoAWQ's two searches (awq/quantize/quantizer.py), for weights quantized by quantize_asym_groups:
//   scale search  for a group of linears sharing one input x [M, K]: per input channel s = x_mean^r /
//                 (w_mean^(1-r) + 1e-4) (duo scaling; x_mean^r without it), clamped to >= 1e-4 and divided by
//                 sqrt(max(s) * min(s)), for r = i / n_grid; the s whose Q(W * s) / s gives the smallest output
//                 MSE of the inspected module wins.
//   clip search   per output row and group: the largest |w| kept, org_max * (1 - i / n_grid) for
//                 i < max_shrink * n_grid, minimising the group's output MSE over (a sample of) the inputs.
#pragma once

#include <functional>
#include <vector>

#include "pagoda/quantize/matrix.h"

namespace pagoda::quantizer {

struct AwqSearchOptions {
  int64_t group_size = 128;
  int scale_grid = 20;       // AutoAWQ n_grid
  bool duo_scaling = true;   // AutoAWQ's default
  bool clip = true;          // AutoAWQ apply_clip
  int clip_grid = 20;        // n_grid of _compute_best_clip
  float max_shrink = 0.5f;
  int clip_samples = 512;    // n_sample_token: inputs used by the clip search (every M / n-th row)
};

// Runs the inspected module with candidate weights (one per linear of the group, in the group's order).
using GroupForward = std::function<Matrix(const std::vector<Matrix>& candidates)>;

struct ScaleSearchResult {
  std::vector<float> scales{};  // [K]
  double best_ratio = 0;
  double mse_rtn = 0;           // output MSE with plain round-to-nearest (all scales 1)
  double mse_best = 0;          // output MSE with the chosen scales
};

// `weights` are the group's linears ([N_i, K] each), `x` [M, K] their input, `reference` the module's
// output with the unquantized weights.
ScaleSearchResult search_best_scales(const std::vector<const Matrix*>& weights, const Matrix& x,
                                     const Matrix& reference, const GroupForward& forward,
                                     const AwqSearchOptions& options);

// The best clipping threshold of each row and group of w [N, K] for input x [M, K]: [N, K / G].
std::vector<float> search_best_clip(const Matrix& w, const Matrix& x, const AwqSearchOptions& options);
// w = clamp(w, -max_val, max_val) per row and group.
void apply_clip(Matrix& w, const std::vector<float>& max_val, int64_t group_size);

// Q(W * s) / s: the fake-quantized weight the scale search evaluates.
Matrix scaled_fake_quant(const Matrix& w, const std::vector<float>& scales, int64_t group_size);
double mean_squared_error(const Matrix& a, const Matrix& b);

}  // namespace pagoda::quantizer
