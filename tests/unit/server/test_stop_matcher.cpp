// Stop strings across token boundaries: matched, never leaked, and held-back text released when safe.
#include <gtest/gtest.h>

#include <random>

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

// The definition, by brute force (the matcher before its automata): after each piece, the earliest occurrence of
// any stop string in the held text (ties: the longer) stops; else the longest end of the held text that is a proper
// prefix of a stop string is held back.
struct ReferenceMatcher {
  std::vector<std::string> stops;
  std::string held;
  bool stopped = false;
  StopMatcher::Result push(const std::string& piece) {
    StopMatcher::Result r;
    if (stopped) return r;
    held += piece;
    size_t best = std::string::npos;
    const std::string* best_stop = nullptr;
    for (const std::string& s : stops) {
      if (s.empty()) continue;
      const size_t pos = held.find(s);
      if (pos != std::string::npos && (pos < best || (pos == best && s.size() > best_stop->size()))) {
        best = pos;
        best_stop = &s;
      }
    }
    if (best_stop != nullptr) {
      stopped = true;
      r.text = held.substr(0, best);
      r.stopped = *best_stop;
      held.clear();
      return r;
    }
    size_t keep = 0;
    for (const std::string& s : stops)
      for (size_t len = std::min(s.empty() ? 0 : s.size() - 1, held.size()); len > keep; --len)
        if (held.compare(held.size() - len, len, s, 0, len) == 0) {
          keep = len;
          break;
        }
    r.text = held.substr(0, held.size() - keep);
    held.erase(0, held.size() - keep);
    return r;
  }
};

// Random texts over a 3-letter alphabet (many partial and overlapping matches: "abab", "aab", periodic stops) cut
// into random pieces: every push gives what the definition gives. Copies of a matcher share its automata and keep
// their own state.
TEST(StopMatcher, EqualsTheBruteForceDefinitionOnRandomStreams) {
  std::mt19937 rng(7);
  const auto word = [&](int max_len) {
    std::string w(1 + rng() % max_len, 'a');
    for (char& ch : w) ch = static_cast<char>('a' + rng() % 3);
    return w;
  };
  int stops_seen = 0;
  for (int round = 0; round < 2000; ++round) {
    std::vector<std::string> stops;
    for (int i = static_cast<int>(rng() % 4); i >= 0; --i) stops.push_back(rng() % 8 == 0 ? "" : word(6));
    const StopMatcher prototype(stops);
    StopMatcher m = prototype, other = prototype;
    ReferenceMatcher ref{stops, "", false};
    const std::string text = word(60);
    for (size_t at = 0; at < text.size();) {
      const size_t len = std::min<size_t>(text.size() - at, rng() % 5);
      const std::string piece = text.substr(at, len);
      at += len;
      const StopMatcher::Result got = m.push(piece), want = ref.push(piece);
      ASSERT_EQ(got.text, want.text) << "round " << round << " text " << text << " at " << at;
      ASSERT_EQ(got.stopped, want.stopped) << "round " << round << " text " << text;
      stops_seen += got.stopped.has_value();
    }
    ASSERT_EQ(m.flush(), ref.stopped ? "" : ref.held);
    // A copy shares the automata, not the state: `other`, untouched by m's pushes, reads the whole text as the
    // definition does from the start.
    ReferenceMatcher whole{stops, "", false};
    const StopMatcher::Result got = other.push(text), want = whole.push(text);
    ASSERT_EQ(got.text, want.text) << "round " << round << " (a copy) text " << text;
    ASSERT_EQ(got.stopped, want.stopped) << "round " << round << " (a copy)";
  }
  EXPECT_GT(stops_seen, 500) << "the random streams exercise matches";
}

}  // namespace
}  // namespace pagoda::server
