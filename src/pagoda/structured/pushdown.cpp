// Pushdown stacks over a Grammar (pushdown.h).
#include "pagoda/structured/pushdown.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "pagoda/core/error.h"

namespace pagoda::structured {
namespace {

// The (position, parent) pairs one close() has expanded: open addressing over a power-of-two table whose slots
// carry the generation that wrote them, so that starting a close() is one increment, not a clear, and nothing is
// allocated once the table has grown to what the thread's closes need. (An std::unordered_set, cleared per call,
// spent about 60% of the mask time of a fuzzer's hostile regular expression allocating nodes and rehashing; this
// set took that input from 1.42 to 0.30 s in a release build, before the regex parser folded its nested
// quantifiers.) A table grown past kKeepSlots is released at the next reset, so that one ambiguous grammar does not
// pin its size to the thread.
class ExpandedFrames {
 public:
  void reset() {
    if (keys_.size() > kKeepSlots) {
      std::vector<uint64_t>().swap(keys_);
      std::vector<uint32_t>().swap(stamps_);
    }
    if (++generation_ == 0) {  // wrapped: every stamp is stale again
      std::fill(stamps_.begin(), stamps_.end(), 0u);
      generation_ = 1;
    }
    size_ = 0;
  }
  // Whether `key` is new to this generation (then it is added).
  bool insert(uint64_t key) {
    if (2 * (size_ + 1) > keys_.size()) grow();
    const size_t mask = keys_.size() - 1;
    for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
      if (stamps_[i] != generation_) {
        stamps_[i] = generation_;
        keys_[i] = key;
        ++size_;
        return true;
      }
      if (keys_[i] == key) return false;
    }
  }

 private:
  static constexpr size_t kKeepSlots = size_t{1} << 18;  // 3 MB
  static size_t mix(uint64_t k) {  // a 64-bit finalizer (MurmurHash3's): keys differ in their low bits mostly
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return static_cast<size_t>(k);
  }
  void grow() {
    std::vector<uint64_t> keys = std::move(keys_);
    std::vector<uint32_t> stamps = std::move(stamps_);
    keys_.assign(std::max<size_t>(64, 2 * keys.size()), 0);
    stamps_.assign(keys_.size(), 0u);
    size_ = 0;
    for (size_t i = 0; i < keys.size(); ++i)
      if (stamps[i] == generation_) insert(keys[i]);
  }
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> stamps_;
  uint32_t generation_ = 0;
  size_t size_ = 0;
};

// Expands work items (a position and the return frame below it) until every live stack's top is a char set.
// Each (position, parent) pair is expanded once (frames are hash-consed, so that is each distinct stack).
void close(const Grammar& g, StackArena& arena, std::vector<Frame>& work, StackSet& out, ExpansionBudget& budget) {
  const std::vector<Symbol>& symbols = g.symbols();
  // Kept between calls: the token-mask search closes stacks hundreds of thousands of times a step.
  thread_local ExpandedFrames seen;
  seen.reset();
  const auto first_time = [&](const Frame& f) {
    return seen.insert((uint64_t{static_cast<uint32_t>(f.pos)} << 32) | static_cast<uint32_t>(f.parent + 1));
  };
  while (!work.empty()) {
    const Frame f = work.back();
    work.pop_back();
    budget.expand();
    if (!first_time(f)) continue;
    const Symbol& s = symbols[static_cast<size_t>(f.pos)];
    switch (s.kind) {
      case Symbol::Kind::kChars:
        out.tops.push_back(f);
        if (out.tops.size() > kMaxStacks)
          throw InvalidRequest("the output constraint is too ambiguous (over 4096 parses alive at once)");
        break;
      case Symbol::Kind::kEnd:
        if (f.parent < 0) {
          out.complete = true;
        } else {
          work.push_back(arena[f.parent]);
        }
        break;
      case Symbol::Kind::kRule: {
        const int32_t next = f.pos + 1;
        // A call in tail position returns straight to our caller; others push (or find) a return frame.
        int32_t ret = f.parent;
        if (symbols[static_cast<size_t>(next)].kind != Symbol::Kind::kEnd) {
          ret = arena.push({next, f.parent});
          budget.hold(arena.size());
        }
        for (int32_t alt : g.alternatives(s.index)) work.push_back({alt, ret});
        break;
      }
    }
  }
}

// Frames are hash-consed, so two stacks of one arena are equal exactly when their tops are.
bool holds(const StackSet& s, const Frame& f) {
  return std::any_of(s.tops.begin(), s.tops.end(), [&](const Frame& t) { return t.pos == f.pos && t.parent == f.parent; });
}

}  // namespace

void ExpansionBudget::examine(size_t n) {
  tops += n;
  if (tops > limits.tops)
    throw InvalidRequest(fmt::format("the output constraint is too costly to follow (over {} parses examined for one token)", limits.tops));
}

void ExpansionBudget::hold(size_t arena_size) {
  if (arena_size > limits.arena)
    throw InvalidRequest(fmt::format("the output constraint is too costly to follow (over {} stack frames held at once)", limits.arena));
}

void ExpansionBudget::expand() {
  if (++frames > limits.frames)
    throw InvalidRequest(fmt::format("the output constraint is too costly to follow (over {} stack frames expanded for one token)", limits.frames));
}

StackSet initial_stacks(const Grammar& g, StackArena& arena, ExpansionBudget& budget) {
  StackSet out;
  thread_local std::vector<Frame> work;
  work.clear();
  for (int32_t alt : g.alternatives(g.root())) work.push_back({alt, -1});
  close(g, arena, work, out, budget);
  return out;
}

void advance_stacks(const Grammar& g, StackArena& arena, const StackSet& in, uint32_t cp, StackSet& out,
                    ExpansionBudget& budget) {
  out.tops.clear();
  out.complete = false;
  budget.examine(in.tops.size());
  thread_local std::vector<Frame> work;
  work.clear();
  for (const Frame& t : in.tops) {
    const Symbol& s = g.symbols()[static_cast<size_t>(t.pos)];
    if (g.char_sets()[static_cast<size_t>(s.index)].contains(cp)) work.push_back({t.pos + 1, t.parent});
  }
  close(g, arena, work, out, budget);
}

bool same_stacks(const StackSet& a, const StackSet& b) {
  if (a.complete != b.complete || a.tops.size() != b.tops.size()) return false;  // tops are distinct in a set
  for (const Frame& f : a.tops)
    if (!holds(b, f)) return false;
  return true;
}

bool any_top_intersects(const Grammar& g, const StackSet& s, uint32_t lo, uint32_t hi) {
  for (const Frame& t : s.tops) {
    const Symbol& sym = g.symbols()[static_cast<size_t>(t.pos)];
    if (g.char_sets()[static_cast<size_t>(sym.index)].intersects(lo, hi)) return true;
  }
  return false;
}

Utf8Cursor::Step Utf8Cursor::step(uint8_t b) {
  if (remaining_ == 0) {
    if (b < 0x80) {
      value_ = b;
      return Step::kComplete;
    }
    next_lo_ = 0x80;
    next_hi_ = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      value_ = b & 0x1Fu;
      remaining_ = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      value_ = b & 0x0Fu;
      remaining_ = 2;
      if (b == 0xE0) next_lo_ = 0xA0;  // no overlong forms
      if (b == 0xED) next_hi_ = 0x9F;  // no surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
      value_ = b & 0x07u;
      remaining_ = 3;
      if (b == 0xF0) next_lo_ = 0x90;
      if (b == 0xF4) next_hi_ = 0x8F;  // nothing above U+10FFFF
    } else {
      return Step::kInvalid;
    }
    return Step::kPartial;
  }
  if (b < next_lo_ || b > next_hi_) return Step::kInvalid;
  next_lo_ = 0x80;
  next_hi_ = 0xBF;
  value_ = (value_ << 6) | (b & 0x3Fu);
  return --remaining_ == 0 ? Step::kComplete : Step::kPartial;
}

}  // namespace pagoda::structured
