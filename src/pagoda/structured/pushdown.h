// Running a Grammar: the set of pushdown stacks that are alive after some text, advanced one code point at a
// time. A stack is its top frame (a position at a char-set symbol) over a chain of return frames kept in a
// StackArena; stacks share their tails, so advancing copies nothing but the tops. Rules called in tail
// position return straight to their caller's caller, so a loop such as x ::= C x keeps the stack flat.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "pagoda/structured/grammar.h"

namespace pagoda::structured {

struct Frame {
  int32_t pos = 0;      // index into Grammar::symbols(): where this frame continues
  int32_t parent = -1;  // the return frame below it in the arena, -1 at the bottom
};

// Return frames, hash-consed: pushing a frame equal to one already held (same position, same parent index)
// returns that one, so equal stacks are the same index all the way down and a set of stacks is deduplicated
// by (position, parent) alone. Without it, nested repetitions of things that may be empty ("(a*)*")
// produce equal stacks under different frames, and the set doubles with each character.
class StackArena {
 public:
  int32_t push(Frame f) {
    const auto [it, added] = index_.try_emplace(key(f), static_cast<int32_t>(frames_.size()));
    if (added) frames_.push_back(f);
    return it->second;
  }
  const Frame& operator[](int32_t i) const { return frames_[static_cast<size_t>(i)]; }
  size_t size() const { return frames_.size(); }
  // Drops the frames pushed since size() was n (a search backing out).
  void truncate(size_t n) {
    for (size_t i = n; i < frames_.size(); ++i) index_.erase(key(frames_[i]));
    frames_.resize(n);
  }

 private:
  static uint64_t key(Frame f) { return (uint64_t{static_cast<uint32_t>(f.pos)} << 32) | static_cast<uint32_t>(f.parent + 1); }
  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, int32_t> index_;
};

// The live stacks: each top's pos is a kChars symbol. `complete`: the grammar may end here.
struct StackSet {
  std::vector<Frame> tops;
  bool complete = false;
  bool dead() const { return tops.empty() && !complete; }
};

// Thrown (as InvalidRequest) when an ambiguous grammar would keep more stacks than this.
constexpr size_t kMaxStacks = 4096;

// The work one token mask (or one accepted token, or the start) may cost, over every call it makes: the tops
// examined (a set lookup each) and the frames expanded (a hash lookup, often an arena push), each bounding time
// (under a second in a release build: about 32 ns a frame on a bounded string's mask), and the return frames the arena holds at once, bounding memory. Past
// a limit an expansion throws InvalidRequest (the mask then ends the output). The largest honest masks measured
// (docs/RELIABILITY.md, uncached, Llama-3's vocabulary): a JSON string of at most 12 to 1,000 characters expands
// 1.6M (12) to 1.7M (100, 1,000) frames and examines 0.71M to 0.73M tops (51 ms); a 4,000-word enum examines 1.5M tops and expands 132k frames.
// Nested counts of things that may be empty ("x?{929}{86}{929}{86}") would expand billions of frames in one
// closure (each frame of every count above the item): the regex parser refuses those, and the arena bound stops
// what else might (a fuzzer's inputs of that kind once ran a mask out of 2 GB).
struct ExpansionLimits {
  size_t tops = 20'000'000;
  size_t frames = 20'000'000;
  size_t arena = 1'000'000;  // frames of 8 bytes plus their index: about 50 MB
};
struct ExpansionBudget {
  ExpansionLimits limits{};
  size_t tops = 0, frames = 0;
  void examine(size_t n);        // each throws InvalidRequest past its limit
  void expand();
  void hold(size_t arena_size);
};

// The stacks at the start of the grammar.
StackSet initial_stacks(const Grammar& g, StackArena& arena, ExpansionBudget& budget);
// The stacks after `cp`: every top whose set holds it moves on, then rules are expanded to their first
// char sets. `out` is overwritten.
void advance_stacks(const Grammar& g, StackArena& arena, const StackSet& in, uint32_t cp, StackSet& out,
                    ExpansionBudget& budget);
// The same stacks (of one arena), tops in any order.
bool same_stacks(const StackSet& a, const StackSet& b);
// Whether some top's set holds a code point in [lo, hi] (a partial UTF-8 character can still complete).
bool any_top_intersects(const Grammar& g, const StackSet& s, uint32_t lo, uint32_t hi);

// Decodes UTF-8 one byte at a time, strictly (no overlong forms, surrogates or values above U+10FFFF).
class Utf8Cursor {
 public:
  enum class Step { kInvalid, kPartial, kComplete };
  Step step(uint8_t byte);
  bool pending() const { return remaining_ > 0; }
  uint32_t code_point() const { return value_; }  // after kComplete
  // The code points a pending character can still become (the next byte's limits included: after 0xF0 the
  // character is at least U+10000).
  uint32_t pending_lo() const { return ((value_ << 6) | (next_lo_ & 0x3Fu)) << (6 * (remaining_ - 1)); }
  uint32_t pending_hi() const {
    return (((value_ << 6) | (next_hi_ & 0x3Fu)) << (6 * (remaining_ - 1))) | ((1u << (6 * (remaining_ - 1))) - 1);
  }

 private:
  uint32_t value_ = 0;
  uint8_t remaining_ = 0;
  uint8_t next_lo_ = 0x80, next_hi_ = 0xBF;  // what the next continuation byte may be
};

}  // namespace pagoda::structured
