// CLI11 validators for numeric options with a message that states the rule (CLI11's own PositiveNumber says
// "Value 0 not in range 0.000000 to 1.79e308").
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <system_error>

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
// An unsigned 64-bit integer, written in decimal (a seed): no sign, nothing past 2^64 - 1.
inline const CLI::Validator kUint64 = CLI::Validator(
    [](std::string& text) -> std::string {
      uint64_t value = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (text.empty() || ec != std::errc() || end != text.data() + text.size())
        return "must be an integer from 0 to 18446744073709551615, not " + text;
      return "";
    },
    "UINT64");
inline const CLI::Validator kPositive = number_check(false);
inline const CLI::Validator kNonNegative = number_check(true);

}  // namespace pagoda::cli
