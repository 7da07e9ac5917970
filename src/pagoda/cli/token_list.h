// Parsing token-id lists given on the command line ("1,2,3" or "1 2 3").
#pragma once

#include <string>
#include <vector>

#include "pagoda/core/types.h"

namespace pagoda::cli {

// Throws InvalidRequest naming `what` on anything but integers separated by commas or spaces.
std::vector<TokenId> parse_token_list(const std::string& text, const std::string& what);

}  // namespace pagoda::cli
