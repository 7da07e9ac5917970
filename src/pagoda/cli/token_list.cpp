// Token-id list parsing.
#include "pagoda/cli/token_list.h"

#include <charconv>

#include "pagoda/core/error.h"

namespace pagoda::cli {

std::vector<TokenId> parse_token_list(const std::string& text, const std::string& what) {
  std::vector<TokenId> ids;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    if (*p == ',' || *p == ' ' || *p == '\n' || *p == '\t') {
      ++p;
      continue;
    }
    TokenId id = 0;
    const auto [next, ec] = std::from_chars(p, end, id);
    if (ec != std::errc() || id < 0)
      throw InvalidRequest(what + ": expected non-negative integers separated by commas, got '" + text + "'");
    ids.push_back(id);
    p = next;
  }
  return ids;
}

}  // namespace pagoda::cli
