// ProgressBar: drawn only when asked for, on a terminal, for work above the size threshold.
#include "pagoda/loader/progress_bar.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace pagoda {
namespace {

TEST(ProgressBar, EnabledOnlyForLargeWorkOnATerminal) {
  EXPECT_FALSE(ProgressBar("x", ProgressBar::kMinBytes * 4, false).enabled());
  EXPECT_FALSE(ProgressBar("x", ProgressBar::kMinBytes - 1, true).enabled());
  EXPECT_EQ(ProgressBar("x", ProgressBar::kMinBytes, true).enabled(), ::isatty(STDERR_FILENO) == 1);
  ProgressBar bar("x", 100, true);
  bar.advance(50);
  bar.set(1000);  // clamps; never throws
  bar.finish();
  bar.finish();  // idempotent
}

}  // namespace
}  // namespace pagoda
