// Names of the quantization schemes (logs, `pagoda inspect`).
#include "pagoda/core/quant_scheme.h"

namespace pagoda {

std::string_view quant_scheme_name(QuantScheme scheme) {
  switch (scheme) {
    case QuantScheme::kNone: return "none";
    case QuantScheme::kInt4Group: return "int4-group";
    case QuantScheme::kInt8Channel: return "int8";
    case QuantScheme::kFp8Channel: return "fp8-channel";
  }
  return "?";
}

}  // namespace pagoda
