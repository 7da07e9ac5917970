// Heatmap: rows of time-binned values (time x metric), grouped in panels, drawn as coloured cells in a
// self-contained SVG (each row on its own colour scale, a tooltip per cell) or written as JSON. What the
// rows mean is the caller's business (see server/gpu_timeline.h).
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace pagoda::metrics {

struct HeatmapRow {
  std::string name;            // e.g. "SM utilisation"
  std::string unit;            // e.g. "%", "tok", "W"
  std::vector<double> values;  // one per bin; NaN: no data in that bin
  double scale_max = 0;        // the value drawn brightest; 0: the row's largest value
};

struct HeatmapPanel {
  std::string title;
  std::string note;  // a line under the title (e.g. why a panel is empty)
  std::vector<HeatmapRow> rows;
};

struct Heatmap {
  std::string title;
  double bin_seconds = 1;
  double start_seconds = 0;  // time of bin 0's left edge, from the origin the caller names in `title`
  int num_bins = 0;
  std::vector<HeatmapPanel> panels;
};

// Bins [start, start + num_bins * bin) of a time axis; helpers for filling rows.
struct TimeBins {
  double start = 0, width = 1;
  int count = 0;
  // The bin holding time `t`, or -1 outside.
  int index(double t) const {
    if (t < start) return -1;
    const int i = static_cast<int>((t - start) / width);
    return i < count ? i : -1;
  }
  // Spreads `amount` over [t0, t1) in proportion to each bin's overlap (all of it at t0 when t1 <= t0).
  void spread(std::vector<double>& row, double t0, double t1, double amount) const;
};

std::string render_svg(const Heatmap& heatmap);
nlohmann::json to_json(const Heatmap& heatmap);

}  // namespace pagoda::metrics
