// Stop strings across token boundaries: matched, never leaked, and held-back text released when safe.
#include <gtest/gtest.h>

#include "pagoda/server/stop_matcher.h"

namespace pagoda::server {
namespace {

std::string feed(StopMatcher& m, const std::vector<std::string>& pieces, std::optional<std::string>* stopped = nullptr) {
  std::string out;
  for (const auto& p : pieces) {
    auto r = m.push(p);
    out += r.text;
    if (r.stopped && stopped) *stopped = r.stopped;
  }
  return out + m.flush();
}

TEST(StopMatcher, NoStopsPassesThrough) {
  StopMatcher m({});
  EXPECT_EQ(feed(m, {"a", "bc", ""}), "abc");
}

TEST(StopMatcher, MatchAcrossPieces) {
  StopMatcher m({"END"});
  std::optional<std::string> stopped;
  EXPECT_EQ(feed(m, {"hello E", "N", "D world"}, &stopped), "hello ");
  EXPECT_EQ(stopped, "END");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("more").text, "");
}

TEST(StopMatcher, HoldsBackOnlyPossibleStarts) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("abc E").text, "abc ");
  EXPECT_EQ(m.push("x").text, "Ex");  // "Ex" cannot start "END": released
  EXPECT_EQ(m.push("EN").text, "");
  EXPECT_EQ(m.flush(), "EN");  // generation ended without a match
}

TEST(StopMatcher, EarliestMatchWins) {
  StopMatcher m({"world", "lo w"});
  auto r = m.push("hello world");
  EXPECT_EQ(r.text, "hel");
  EXPECT_EQ(r.stopped, "lo w");
}

TEST(StopMatcher, StopAtStart) {
  StopMatcher m({"\n"});
  auto r = m.push("\nabc");
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.stopped, "\n");
}

TEST(StopMatcher, OverlappingPrefixes) {
  StopMatcher m({"aab"});
  EXPECT_EQ(m.push("a").text, "");
  EXPECT_EQ(m.push("a").text, "");
  EXPECT_EQ(m.push("a").text, "a");  // "aaa": only "aa" can still start "aab"
  auto r = m.push("b");
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.stopped, "aab");
}

}  // namespace
}  // namespace pagoda::server
