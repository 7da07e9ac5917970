// ProgressBar: drawn only when asked for, on a terminal, for work above the size threshold (bytes) or for
// any number of items.
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

TEST(ProgressBar, CountsItemsHoweverFew) {
  EXPECT_FALSE(ProgressBar("x", 3, "chunks", false).enabled());
  EXPECT_FALSE(ProgressBar("x", 0, "chunks", true).enabled());
  EXPECT_EQ(ProgressBar("x", 3, "chunks", true).enabled(), ::isatty(STDERR_FILENO) == 1);
  ProgressBar bar("x", 3, "chunks", true);
  bar.advance(1);
  bar.advance(5);  // clamps
  bar.finish();
}

}  // namespace
}  // namespace pagoda
