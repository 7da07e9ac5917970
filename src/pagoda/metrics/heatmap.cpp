// Heatmap rendering: SVG cells on a per-row colour scale (dark blue = 0 to yellow = the row's top), and
// the same numbers as JSON.
#include "pagoda/metrics/heatmap.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace pagoda::metrics {
namespace {

// A perceptual dark-to-bright ramp (five anchors, linear in between).
std::string colour(double x) {
  static constexpr std::array<std::array<double, 3>, 5> kRamp = {{
      {13, 8, 135}, {126, 3, 168}, {204, 71, 120}, {248, 149, 64}, {240, 249, 33}}};
  x = std::clamp(x, 0.0, 1.0) * (kRamp.size() - 1);
  const size_t i = std::min(static_cast<size_t>(x), kRamp.size() - 2);
  const double f = x - static_cast<double>(i);
  std::array<int, 3> c{};
  for (int k = 0; k < 3; ++k) c[k] = static_cast<int>(std::lround(kRamp[i][k] + f * (kRamp[i + 1][k] - kRamp[i][k])));
  return fmt::format("#{:02x}{:02x}{:02x}", c[0], c[1], c[2]);
}

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string number(double v) {
  if (std::isnan(v)) return "no data";
  if (v != 0 && std::fabs(v) < 0.01) return fmt::format("{:.2e}", v);
  return fmt::format("{:.4g}", v);
}

double row_top(const HeatmapRow& row) {
  if (row.scale_max > 0) return row.scale_max;
  double top = 0;
  for (double v : row.values)
    if (!std::isnan(v)) top = std::max(top, v);
  return top;
}

}  // namespace

void TimeBins::spread(std::vector<double>& row, double t0, double t1, double amount) const {
  if (t1 <= t0) {
    if (int i = index(t0); i >= 0) row[static_cast<size_t>(i)] += amount;
    return;
  }
  const double rate = amount / (t1 - t0);
  const int first = std::max(0, static_cast<int>(std::floor((t0 - start) / width)));
  for (int i = first; i < count; ++i) {
    const double b0 = start + i * width, b1 = b0 + width;
    if (b0 >= t1) break;
    const double overlap = std::min(b1, t1) - std::max(b0, t0);
    if (overlap > 0) row[static_cast<size_t>(i)] += rate * overlap;
  }
}

std::string render_svg(const Heatmap& h) {
  constexpr int kLabelWidth = 230, kRightWidth = 120, kRowHeight = 16, kTitleHeight = 22, kAxisHeight = 30;
  const int bins = std::max(h.num_bins, 1);
  const double cell = std::clamp(1200.0 / bins, 2.0, 14.0);
  const double plot_width = cell * bins;
  int height = 34;
  for (const HeatmapPanel& p : h.panels)
    height += kTitleHeight + (p.note.empty() ? 0 : 16) + kRowHeight * static_cast<int>(p.rows.size()) + 8;
  height += kAxisHeight;
  const int width = kLabelWidth + static_cast<int>(std::ceil(plot_width)) + kRightWidth;

  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"8\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
      width, height, escape_xml(h.title));
  int y = 34;
  for (const HeatmapPanel& p : h.panels) {
    out += fmt::format("<text x=\"8\" y=\"{}\" font-weight=\"bold\">{}</text>\n", y + 15, escape_xml(p.title));
    y += kTitleHeight;
    if (!p.note.empty()) {
      out += fmt::format("<text x=\"16\" y=\"{}\" fill=\"#555\">{}</text>\n", y + 10, escape_xml(p.note));
      y += 16;
    }
    for (const HeatmapRow& row : p.rows) {
      const double top = row_top(row);
      out += fmt::format("<text x=\"16\" y=\"{}\">{}{}</text>\n", y + 12, escape_xml(row.name),
                         row.unit.empty() ? "" : " (" + escape_xml(row.unit) + ")");
      for (int i = 0; i < bins && i < static_cast<int>(row.values.size()); ++i) {
        const double v = row.values[static_cast<size_t>(i)];
        const std::string fill = std::isnan(v) ? "#e8e8e8" : colour(top > 0 ? v / top : 0);
        out += fmt::format(
            "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"><title>{} t={:.3f}s: {}{}</title></rect>\n",
            kLabelWidth + i * cell, y, cell + 0.05, kRowHeight - 1, fill, escape_xml(row.name),
            h.start_seconds + i * h.bin_seconds, number(v),
            row.unit.empty() ? std::string() : fmt::format(" {}", escape_xml(row.unit)));
      }
      out += fmt::format("<text x=\"{:.0f}\" y=\"{}\" fill=\"#555\">max {}</text>\n", kLabelWidth + plot_width + 6, y + 12,
                         number(top));
      y += kRowHeight;
    }
    y += 8;
  }
  // Time axis: about eight labelled ticks.
  const int step = std::max(1, bins / 8);
  for (int i = 0; i <= bins; i += step) {
    const double x = kLabelWidth + i * cell;
    out += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#333\"/>\n", x, y, x, y + 5);
    out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:.1f}s</text>\n", x, y + 17,
                       h.start_seconds + i * h.bin_seconds);
  }
  out += fmt::format("<text x=\"8\" y=\"{}\" fill=\"#555\">bin {:.3g} s</text>\n", y + 17, h.bin_seconds);
  out += "</svg>\n";
  return out;
}

nlohmann::json to_json(const Heatmap& h) {
  nlohmann::json panels = nlohmann::json::array();
  for (const HeatmapPanel& p : h.panels) {
    nlohmann::json rows = nlohmann::json::array();
    for (const HeatmapRow& r : p.rows) {
      nlohmann::json values = nlohmann::json::array();
      for (double v : r.values) values.push_back(std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v));
      rows.push_back({{"name", r.name}, {"unit", r.unit}, {"values", std::move(values)}});
    }
    panels.push_back({{"title", p.title}, {"note", p.note}, {"rows", std::move(rows)}});
  }
  return {{"title", h.title}, {"bin_seconds", h.bin_seconds}, {"start_seconds", h.start_seconds},
          {"num_bins", h.num_bins}, {"panels", std::move(panels)}};
}

}  // namespace pagoda::metrics
