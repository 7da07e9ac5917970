// Numbers written as text (command-line options, query parameters, key files): the whole text is the number, or
// there is none.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace pagoda {

// A finite number in strtod's forms. A subnormal such as 1e-320 is one (std::stod throws out_of_range for it);
// "4abc", "", "inf" and "nan" are not.
inline std::optional<double> parse_number(const std::string& text) {
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(x)) return std::nullopt;
  return x;
}

// An integer of type T in decimal: nothing for trailing characters, a sign an unsigned T cannot hold, or a value
// past T's range.
template <typename T>
std::optional<T> parse_integer(std::string_view text) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace pagoda
