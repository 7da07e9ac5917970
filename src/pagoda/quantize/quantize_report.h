// The error table `pagoda quantize` prints on stderr: per linear its relative RMS weight error, and for AWQ
// per scaling group the inspected module's output MSE with round-to-nearest and with the searched scales.
#pragma once

#include <string>

#include "pagoda/quantize/quantize_checkpoint.h"

namespace pagoda::quantizer {

std::string format_summary(const QuantizeOptions& options, const QuantizeSummary& summary);

}  // namespace pagoda::quantizer
