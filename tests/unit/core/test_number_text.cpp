// Numbers as text (core/number_text.h): the whole text or nothing, for every kind of near miss.
#include "pagoda/core/number_text.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace pagoda {
namespace {

TEST(NumberText, FiniteNumbersWhole) {
  EXPECT_EQ(parse_number("2.5"), 2.5);
  EXPECT_EQ(parse_number("-3"), -3.0);
  EXPECT_EQ(parse_number("1e3"), 1000.0);
  EXPECT_GT(parse_number("1e-320").value_or(0), 0.0);  // subnormal: a number (std::stod throws on it)
  for (const char* text : {"", "4abc", "1.5 ", "inf", "-inf", "nan", "1e999", "abc", "--1"})
    EXPECT_FALSE(parse_number(text).has_value()) << text;
}

TEST(NumberText, IntegersWithinTheirType) {
  EXPECT_EQ(parse_integer<int>("42"), 42);
  EXPECT_EQ(parse_integer<int>("-7"), -7);
  EXPECT_EQ(parse_integer<uint64_t>("18446744073709551615"), UINT64_MAX);
  for (const char* text : {"", "4abc", "1.5", " 4", "2147483648"}) EXPECT_FALSE(parse_integer<int>(text)) << text;
  for (const char* text : {"-1", "18446744073709551616", "+1"}) EXPECT_FALSE(parse_integer<uint64_t>(text)) << text;
}

}  // namespace
}  // namespace pagoda
