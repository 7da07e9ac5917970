// vLLM's guided_choice: the output is exactly one of the given strings.
#pragma once

#include <string>
#include <vector>

#include "pagoda/structured/grammar.h"

namespace pagoda::structured {

// Throws InvalidRequest when `choices` is empty.
Grammar choice_grammar(const std::vector<std::string>& choices);

}  // namespace pagoda::structured
