// Plain-text tables, one row per linear (and per AWQ group), aligned for a terminal.
#include "pagoda/quantize/quantize_report.h"

#include <fmt/format.h>

namespace pagoda::quantizer {

std::string format_summary(const QuantizeOptions& o, const QuantizeSummary& s) {
  std::string out = fmt::format("{:<40} {:>12} {:>14}\n", "linear", "shape", "rel RMS error");
  double worst = 0;
  for (const LinearSummary& l : s.linears) {
    out += fmt::format("{:<40} {:>12} {:>14.4e}\n", l.name, fmt::format("{}x{}", l.rows, l.cols), l.weight_rel_rms);
    worst = std::max(worst, l.weight_rel_rms);
  }
  if (o.method == QuantizeMethod::kAwq) {
    out += fmt::format("\n{:<6} {:<22} {:>6} {:>14} {:>14} {:>8}\n", "layer", "AWQ group", "ratio", "MSE rtn",
                       "MSE awq", "change");
    for (size_t i = 0; i < s.awq_groups.size(); ++i)
      for (const GroupReport& g : s.awq_groups[i]) {
        if (!g.searched) {
          out += fmt::format("{:<6} {:<22} {:>6} {:>14} {:>14} {:>8}\n", i, g.linears, "-", "-", "-",
                             "skipped (v/o shapes differ)");
          continue;
        }
        const double change = g.mse_rtn > 0 ? 100.0 * (g.mse_awq - g.mse_rtn) / g.mse_rtn : 0.0;
        out += fmt::format("{:<6} {:<22} {:>6.2f} {:>14.4e} {:>14.4e} {:>7.1f}%\n", i, g.linears, g.best_ratio,
                           g.mse_rtn, g.mse_awq, change);
      }
    out += fmt::format("calibration: {} tokens\n", s.calibration_tokens);
  }
  out += fmt::format("{} linears quantized, worst rel RMS error {:.4e}; wrote {} ({} bytes) in {:.2f} s\n",
                     s.linears.size(), worst, o.out_dir, s.bytes_written, s.seconds);
  return out;
}

}  // namespace pagoda::quantizer
