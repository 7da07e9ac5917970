// The request fields that constrain an output, as OpenAI and vLLM spell them: response_format
// ({"type": "text" | "json_object" | "json_schema"}), vLLM's guided_json / guided_regex / guided_choice, and
// its newer structured_outputs object ({"json" | "regex" | "choice": ...}). At most one may be given.
#pragma once

#include <nlohmann/json.hpp>

#include "pagoda/server/openai_request.h"

namespace pagoda::server {

// Throws ApiError (400) naming the field when one is malformed, unsupported (guided_grammar,
// guided_whitespace_pattern), or given together with another.
OutputConstraint parse_output_constraint(const nlohmann::ordered_json& request);

}  // namespace pagoda::server
