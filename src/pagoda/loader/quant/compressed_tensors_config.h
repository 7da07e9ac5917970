// compressed-tensors' quantization_config (llm-compressor): config groups, each a weight scheme with the
// modules it targets, and the ignore list; and which group's scheme a module is stored in.
#pragma once

#include <string>

#include "pagoda/loader/quant/quant_config.h"
#include "pagoda/loader/quant/quant_fields.h"

namespace pagoda::quant {

// Fills q.groups, q.not_converted (the ignore list) and q's scheme fields (those of the first group) from
// `f` (quantization_config); anything the converters cannot honour is a LoadError naming the field.
void parse_compressed_tensors(const QuantFields& f, QuantConfig& q);

// The scheme of q.groups that the Linear `module` gets, as compressed-tensors chose it when it wrote the
// checkpoint, or nullptr when no group targets it or it is ignored (then it is stored unquantized).
const QuantConfig* compressed_tensors_scheme_for(const QuantConfig& q, const std::string& module);

}  // namespace pagoda::quant
