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

std::string_view activation_quant_name(ActivationQuant a) {
  switch (a) {
    case ActivationQuant::kNone: return "none";
    case ActivationQuant::kFp8PerToken: return "fp8-per-token";
    case ActivationQuant::kFp8Static: return "fp8-static";
    case ActivationQuant::kInt8Block: return "int8-block";
    case ActivationQuant::kInt8SuperBlock: return "int8-superblock";
  }
  return "?";
}

}  // namespace pagoda
