// CLI11 validators for numeric options with a message that states the rule (CLI11's own PositiveNumber says
// "Value 0 not in range 0.000000 to 1.79e308").
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdlib>
#include <string>

namespace pagoda::cli {

inline CLI::Validator number_check(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& text) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !std::isfinite(x) || x < 0 || (x == 0 && !allow_zero))
          return (allow_zero ? "must be a number of at least 0, not " : "must be a number above 0, not ") + text;
        return "";
      },
      allow_zero ? "NONNEGATIVE" : "POSITIVE");
}
inline const CLI::Validator kPositive = number_check(false);
inline const CLI::Validator kNonNegative = number_check(true);

}  // namespace pagoda::cli
