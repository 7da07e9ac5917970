// Pushdown stacks over a Grammar (pushdown.h).
#include "pagoda/structured/pushdown.h"

#include <algorithm>
#include <unordered_set>

#include "pagoda/core/error.h"

namespace pagoda::structured {
namespace {

bool contains_frame(const std::vector<Frame>& v, Frame f) {
  return std::any_of(v.begin(), v.end(), [&](const Frame& x) { return x.pos == f.pos && x.parent == f.parent; });
}

// Expands work items (a position and the return frame below it) until every live stack's top is a char set.
// Each (position, parent) pair is expanded once (frames are hash-consed, so that is each distinct stack).
void close(const Grammar& g, StackArena& arena, std::vector<Frame>& work, StackSet& out) {
  const std::vector<Symbol>& symbols = g.symbols();
  // Scratch kept between calls: the token-mask search closes stacks hundreds of thousands of times a step.
  // Expanded items: a list while short, a hash set beyond (ambiguous grammars keep thousands alive).
  thread_local std::vector<Frame> seen;
  thread_local std::unordered_set<uint64_t> seen_set;
  seen.clear();
  // clear() writes every bucket, and the buckets stay at the largest size the set ever had: only a set the last
  // call used is cleared, and one grown past a few thousand buckets is dropped, so that one ambiguous grammar
  // does not make every later close() on this thread pay for its size (the structured fuzz target ran 1.7x
  // faster without that, median of 4 runs of 1,500 executions).
  if (!seen_set.empty()) {
    if (seen_set.bucket_count() > 4096) {
      std::unordered_set<uint64_t>().swap(seen_set);
    } else {
      seen_set.clear();
    }
  }
  const auto first_time = [&](const Frame& f) {
    if (seen.size() < 32) {
      if (contains_frame(seen, f)) return false;
      seen.push_back(f);
      if (seen.size() == 32)
        for (const Frame& x : seen) seen_set.insert((uint64_t{static_cast<uint32_t>(x.pos)} << 32) | static_cast<uint32_t>(x.parent + 1));
      return true;
    }
    return seen_set.insert((uint64_t{static_cast<uint32_t>(f.pos)} << 32) | static_cast<uint32_t>(f.parent + 1)).second;
  };
  while (!work.empty()) {
    const Frame f = work.back();
    work.pop_back();
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
        const int32_t ret =
            symbols[static_cast<size_t>(next)].kind == Symbol::Kind::kEnd ? f.parent : arena.push({next, f.parent});
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

StackSet initial_stacks(const Grammar& g, StackArena& arena) {
  StackSet out;
  thread_local std::vector<Frame> work;
  work.clear();
  for (int32_t alt : g.alternatives(g.root())) work.push_back({alt, -1});
  close(g, arena, work, out);
  return out;
}

void advance_stacks(const Grammar& g, StackArena& arena, const StackSet& in, uint32_t cp, StackSet& out) {
  out.tops.clear();
  out.complete = false;
  thread_local std::vector<Frame> work;
  work.clear();
  for (const Frame& t : in.tops) {
    const Symbol& s = g.symbols()[static_cast<size_t>(t.pos)];
    if (g.char_sets()[static_cast<size_t>(s.index)].contains(cp)) work.push_back({t.pos + 1, t.parent});
  }
  close(g, arena, work, out);
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
