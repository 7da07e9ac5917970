// CompiledConstraint and ConstraintMatcher (constraint.h). The token mask is a depth-first walk of the
// vocabulary trie carrying the grammar's stacks: a subtree is dropped at the first byte no stack takes, and
// where the stacks are stable under a loop set (a string's characters, digits), a subtree whose tokens are
// all made of that set is accepted whole, without a walk.
#include "pagoda/structured/constraint.h"

#include <limits>
#include <unordered_map>

#include "pagoda/core/check.h"

namespace pagoda::structured {

std::shared_ptr<const CompiledConstraint> compile_constraint(Grammar grammar, std::shared_ptr<const VocabIndex> vocab,
                                                             std::string description) {
  auto c = std::make_shared<CompiledConstraint>();
  for (int32_t set : grammar.loop_sets()) {
    const CharSet& loop = grammar.char_sets()[static_cast<size_t>(set)];
    CompiledConstraint::LoopClass lc{set, vocab->class_counts(loop), {}};
    for (const CharSet& other : grammar.char_sets())
      lc.relation.push_back(other.contains_all(loop) ? 1 : other.disjoint(loop) ? 0 : -1);
    c->loop_classes.push_back(std::move(lc));
  }
  c->grammar = std::move(grammar);
  c->vocab = std::move(vocab);
  c->description = std::move(description);
  return c;
}

namespace {

constexpr int kUnknown = -2, kNone = -1;

class MaskSearch {
 public:
  MaskSearch(const CompiledConstraint& c, StackArena& arena, std::vector<uint64_t>& bits)
      : c_(c), g_(c.grammar), v_(*c.vocab), arena_(arena), bits_(bits) {}

  void run(const StackSet& stacks, Utf8Cursor cursor) {
    const int stable = cursor.pending() ? kNone : stable_class(stacks);
    visit(v_.nodes()[0], stacks, cursor, stable);
  }

 private:
  const CompiledConstraint& c_;
  const Grammar& g_;
  const VocabIndex& v_;
  StackArena& arena_;
  std::vector<uint64_t>& bits_;

  void allow(int32_t lo, int32_t hi) {
    const std::vector<TokenId>& ids = v_.sorted_ids();
    for (int32_t i = lo; i < hi; ++i) {
      const auto id = static_cast<uint32_t>(ids[static_cast<size_t>(i)]);
      bits_[id >> 6] |= uint64_t{1} << (id & 63);
    }
  }

  // A loop class under which `s` is stable: every top's set holds all of the class or none of it, and
  // taking one of its characters gives the same stacks back. Then any text of that class keeps `s` as is.
  int stable_class(const StackSet& s) {
    for (size_t k = 0; k < c_.loop_classes.size(); ++k) {
      const CompiledConstraint::LoopClass& lc = c_.loop_classes[k];
      bool has_loop_top = false, clean = true;
      for (const Frame& t : s.tops) {
        const int32_t set = g_.symbols()[static_cast<size_t>(t.pos)].index;
        has_loop_top |= set == lc.set;
        clean &= lc.relation[static_cast<size_t>(set)] >= 0;
      }
      if (!has_loop_top || !clean) continue;
      const size_t mark = arena_.size();
      StackSet after;
      advance_stacks(g_, arena_, s, g_.char_sets()[static_cast<size_t>(lc.set)].first(), after);
      const bool same = same_stacks(arena_, s, after);
      arena_.truncate(mark);
      if (same) return static_cast<int>(k);
    }
    return kNone;
  }

  void visit(const VocabIndex::Node& node, const StackSet& s, Utf8Cursor cursor, int stable) {
    const std::vector<int32_t>* counts = stable >= 0 ? c_.loop_classes[static_cast<size_t>(stable)].counts.get() : nullptr;
    for (int32_t ci = node.first_child; ci < node.first_child + node.num_children; ++ci) {
      const VocabIndex::Node& child = v_.nodes()[static_cast<size_t>(ci)];
      if (counts != nullptr && !cursor.pending() &&
          (*counts)[static_cast<size_t>(child.hi)] - (*counts)[static_cast<size_t>(child.lo)] == child.hi - child.lo) {
        allow(child.lo, child.hi);
        continue;
      }
      Utf8Cursor next_cursor = cursor;
      const Utf8Cursor::Step step = next_cursor.step(child.byte);
      if (step == Utf8Cursor::Step::kInvalid) continue;
      const size_t mark = arena_.size();
      StackSet advanced;
      const StackSet* next = &s;
      int next_stable = stable;
      if (step == Utf8Cursor::Step::kPartial) {
        if (!any_top_intersects(g_, s, next_cursor.pending_lo(), next_cursor.pending_hi())) continue;
      } else if (stable < 0 ||
                 !g_.char_sets()[static_cast<size_t>(c_.loop_classes[static_cast<size_t>(stable)].set)].contains(
                     next_cursor.code_point())) {
        advance_stacks(g_, arena_, s, next_cursor.code_point(), advanced);
        if (advanced.dead()) {
          arena_.truncate(mark);
          continue;
        }
        next = &advanced;
        next_stable = kUnknown;
      }
      if (child.end_hi > child.lo) allow(child.lo, child.end_hi);
      if (child.num_children > 0) {
        if (next_stable == kUnknown) next_stable = next_cursor.pending() ? kNone : stable_class(*next);
        visit(child, *next, next_cursor, next_stable);
      }
      arena_.truncate(mark);
    }
  }
};

bool is_end(const VocabIndex& v, TokenId id) {
  for (TokenId e : v.end_ids())
    if (e == id) return true;
  return false;
}

}  // namespace

ConstraintMatcher::ConstraintMatcher(std::shared_ptr<const CompiledConstraint> constraint) : c_(std::move(constraint)) {
  stacks_ = initial_stacks(c_->grammar, arena_);
}

const std::vector<uint64_t>& ConstraintMatcher::allowed_tokens() {
  if (allowed_fresh_) return allowed_;
  const VocabIndex& v = *c_->vocab;
  allowed_.assign((static_cast<size_t>(v.num_logits()) + 63) / 64, 0);
  const size_t mark = arena_.size();
  MaskSearch(*c_, arena_, allowed_).run(stacks_, cursor_);
  arena_.truncate(mark);
  bool any = false;
  for (uint64_t w : allowed_) any |= w != 0;
  if (complete() || !any) {
    for (TokenId e : v.end_ids())
      if (e >= 0 && e < v.num_logits()) allowed_[static_cast<size_t>(e) >> 6] |= uint64_t{1} << (e & 63);
  }
  allowed_fresh_ = true;
  return allowed_;
}

void ConstraintMatcher::mask_logits(std::span<float> logits) {
  const std::vector<uint64_t>& bits = allowed_tokens();
  constexpr float kForbidden = -std::numeric_limits<float>::infinity();
  const size_t n = std::min(logits.size(), static_cast<size_t>(c_->vocab->num_logits()));
  for (size_t w = 0; w * 64 < n; ++w) {  // a word at a time: most are all allowed or all forbidden
    const uint64_t word = bits[w];
    const size_t end = std::min(n, w * 64 + 64);
    if (word == ~uint64_t{0} && end == w * 64 + 64) continue;
    for (size_t i = w * 64; i < end; ++i)
      if (!((word >> (i & 63)) & 1)) logits[i] = kForbidden;
  }
  for (size_t i = n; i < logits.size(); ++i) logits[i] = kForbidden;
}

bool ConstraintMatcher::accept(TokenId id) {
  const VocabIndex& v = *c_->vocab;
  if (id < 0 || id >= v.num_logits()) return false;
  if (is_end(v, id)) {
    // An end token is what the mask offered once complete, or when nothing else was possible.
    return complete() || (allowed_fresh_ && ((allowed_[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1));
  }
  return !v.bytes(id).empty() && advance(v.bytes(id), /*commit=*/true);
}

bool ConstraintMatcher::allows(TokenId id) {
  const VocabIndex& v = *c_->vocab;
  if (id < 0 || id >= v.num_logits()) return false;
  if (is_end(v, id)) return complete();
  return !v.bytes(id).empty() && advance(v.bytes(id), /*commit=*/false);
}

bool ConstraintMatcher::advance(std::string_view bytes, bool commit) {
  StackSet stacks = stacks_;
  Utf8Cursor cursor = cursor_;
  const size_t mark = arena_.size();
  StackSet next;
  for (char c : bytes) {
    const Utf8Cursor::Step step = cursor.step(static_cast<uint8_t>(c));
    bool ok = step != Utf8Cursor::Step::kInvalid;
    if (ok && step == Utf8Cursor::Step::kPartial) {
      ok = any_top_intersects(c_->grammar, stacks, cursor.pending_lo(), cursor.pending_hi());
    } else if (ok) {
      advance_stacks(c_->grammar, arena_, stacks, cursor.code_point(), next);
      ok = !next.dead();
      std::swap(stacks, next);
    }
    if (!ok) {
      arena_.truncate(mark);
      return false;
    }
  }
  if (!commit) {
    arena_.truncate(mark);
    return true;
  }
  stacks_ = std::move(stacks);
  cursor_ = cursor;
  allowed_fresh_ = false;
  if (arena_.size() > 8192) compact_arena();
  return true;
}

// Return frames no live stack reaches are dropped (each accepted token leaves a few behind).
void ConstraintMatcher::compact_arena() {
  StackArena kept;
  std::unordered_map<int32_t, int32_t> moved;
  auto move_chain = [&](int32_t frame, auto&& self) -> int32_t {
    if (frame < 0) return -1;
    const auto it = moved.find(frame);
    if (it != moved.end()) return it->second;
    const Frame f = arena_[frame];
    const int32_t parent = self(f.parent, self);
    const int32_t index = kept.push({f.pos, parent});
    moved.emplace(frame, index);
    return index;
  };
  for (Frame& t : stacks_.tops) t.parent = move_chain(t.parent, move_chain);
  arena_ = std::move(kept);
}

}  // namespace pagoda::structured
