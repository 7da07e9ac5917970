// CLI11 validators for numeric options with a message that states the rule (CLI11's own PositiveNumber says
// "Value 0 not in range 0.000000 to 1.79e308").
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "pagoda/core/number_text.h"

namespace pagoda::cli {

inline CLI::Validator number_check(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& text) -> std::string {
        const std::optional<double> x = parse_number(text);
        if (!x || *x < 0 || (*x == 0 && !allow_zero))
          return (allow_zero ? "must be a number of at least 0, not " : "must be a number above 0, not ") + text;
        return "";
      },
      allow_zero ? "NONNEGATIVE" : "POSITIVE");
}
inline const CLI::Validator kPositive = number_check(false);
inline const CLI::Validator kNonNegative = number_check(true);
// An unsigned 64-bit integer, written in decimal (a seed): no sign, nothing past 2^64 - 1.
inline const CLI::Validator kUint64 = CLI::Validator(
    [](std::string& text) -> std::string {
      return parse_integer<uint64_t>(text) ? "" : "must be an integer from 0 to 18446744073709551615, not " + text;
    },
    "UINT64");

}  // namespace pagoda::cli
