// Measurement knobs (core/env_knob.h): what each value of the variable means, the same for every knob.
#include "pagoda/core/env_knob.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <tuple>

namespace pagoda {
namespace {

TEST(EnvKnob, FlagsAndNumbers) {
  constexpr const char* kName = "PAGODA_TEST_ENV_KNOB";
  unsetenv(kName);
  EXPECT_TRUE(env_flag(kName, true));
  EXPECT_FALSE(env_flag(kName, false));
  EXPECT_EQ(env_int(kName, 7), 7);
  for (const auto& [value, flag_if_on, flag_if_off, number] :
       {std::tuple{"1", true, true, 1}, {"0", false, false, 0}, {"", true, false, 7}, {"x", true, false, 0},
        {"128", true, true, 128}, {"-3", true, false, -3}}) {
    setenv(kName, value, 1);
    EXPECT_EQ(env_flag(kName, true), flag_if_on) << value;
    EXPECT_EQ(env_flag(kName, false), flag_if_off) << value;
    EXPECT_EQ(env_int(kName, 7), number) << value;
  }
  unsetenv(kName);
}

}  // namespace
}  // namespace pagoda
