// CompiledConstraint and ConstraintMatcher (constraint.h). The token mask is a depth-first walk of the
// vocabulary trie carrying the grammar's stacks: a subtree is dropped at the first byte no stack takes, and
// where the stacks are stable under a loop set (a string's characters, digits), a subtree whose tokens are
// all made of that set is accepted whole, without a walk.
#include "pagoda/structured/constraint.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "pagoda/core/check.h"
#include "pagoda/core/error.h"

namespace pagoda::structured {

std::shared_ptr<const CompiledConstraint> compile_constraint(Grammar grammar, std::shared_ptr<const VocabIndex> vocab,
                                                             std::string description, ExpansionLimits limits) {
  {
    StackArena arena;
    ExpansionBudget budget{limits};
    (void)initial_stacks(grammar, arena, budget);  // a grammar too ambiguous or costly to start is refused here
  }
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
  c->limits = limits;
  return c;
}

namespace {

constexpr int kUnknown = -2, kNone = -1;

bool is_end(const VocabIndex& v, TokenId id) {
  for (TokenId e : v.end_ids())
    if (e == id) return true;
  return false;
}

class MaskSearch {
 public:
  MaskSearch(const CompiledConstraint& c, StackArena& arena, std::vector<uint64_t>& bits)
      : c_(c), g_(c.grammar), v_(*c.vocab), arena_(arena), bits_(bits), budget_{c.limits} {}

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
  // The whole walk's work (stable_class's trial advances included): past it the output ends
  // (ConstraintMatcher::error()), so that no constraint can stall the engine or grow the arena without bound.
  ExpansionBudget budget_;

  // Sets bits [lo, hi) of the sorted-order mask, a word at a time.
  void allow(int32_t lo, int32_t hi) {
    auto first = static_cast<size_t>(lo);
    const auto last = static_cast<size_t>(hi);
    while (first < last) {
      const size_t word = first >> 6, bit = first & 63;
      const size_t count = std::min<size_t>(64 - bit, last - first);
      const uint64_t ones = count == 64 ? ~uint64_t{0} : ((uint64_t{1} << count) - 1) << bit;
      bits_[word] |= ones;
      first += count;
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
      advance_stacks(g_, arena_, s, g_.char_sets()[static_cast<size_t>(lc.set)].first(), after, budget_);
      const bool same = same_stacks(s, after);
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
        advance_stacks(g_, arena_, s, next_cursor.code_point(), advanced, budget_);
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

}  // namespace

ConstraintMatcher::ConstraintMatcher(std::shared_ptr<const CompiledConstraint> constraint) : c_(std::move(constraint)) {
  try {
    ExpansionBudget budget{c_->limits};
    stacks_ = initial_stacks(c_->grammar, arena_, budget);
  } catch (const InvalidRequest& e) {  // compile_constraint checks this; kept for grammars built elsewhere
    error_ = e.what();
  }
}

std::string ConstraintMatcher::state_key() const {
  if (cursor_.pending()) return "";
  std::vector<std::string> stacks;
  for (const Frame& t : stacks_.tops) {
    std::string k;
    auto put = [&](int32_t v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put(t.pos);
    for (int32_t f = t.parent; f >= 0; f = arena_[f].parent) put(arena_[f].pos);
    stacks.push_back(std::move(k));
  }
  std::sort(stacks.begin(), stacks.end());
  std::string key(stacks_.complete ? "c" : "o");
  for (const std::string& k : stacks) {
    const auto n = static_cast<uint32_t>(k.size());
    key.append(reinterpret_cast<const char*>(&n), sizeof n);
    key += k;
  }
  return key;
}

void ConstraintMatcher::compute_mask() {
  if (mask_fresh_) return;
  const VocabIndex& v = *c_->vocab;
  if (!error_.empty()) {  // failed earlier: only the end tokens are left
    sorted_mask_ = std::make_shared<const std::vector<uint64_t>>((v.sorted_ids().size() + 63) / 64, 0);
    ends_allowed_ = mask_fresh_ = true;
    return;
  }
  const std::string key = state_key();
  CompiledConstraint::MaskCache& cache = c_->mask_cache;
  sorted_mask_.reset();
  if (!key.empty()) {
    std::lock_guard lock(cache.mutex);
    const auto it = cache.masks.find(key);
    if (it != cache.masks.end()) sorted_mask_ = it->second;
  }
  if (!sorted_mask_) {
    auto mask = std::make_shared<std::vector<uint64_t>>((v.sorted_ids().size() + 63) / 64, 0);
    const size_t mark = arena_.size();
    try {
      MaskSearch(*c_, arena_, *mask).run(stacks_, cursor_);
    } catch (const InvalidRequest& e) {  // too many parses alive, or too much work: end the output here
      std::fill(mask->begin(), mask->end(), 0);
      error_ = e.what();
    }
    arena_.truncate(mark);
    sorted_mask_ = mask;
    // A search that gave up is not cached: a later request reaching this state must give up too, and say so (its
    // cached empty mask used to end that request as if its output were complete).
    if (!key.empty() && error_.empty()) {
      std::lock_guard lock(cache.mutex);
      if (cache.masks.size() >= CompiledConstraint::kMaxCachedMasks) cache.masks.clear();
      cache.masks.emplace(key, sorted_mask_);
    }
  }
  bool any = false;
  for (uint64_t w : *sorted_mask_) any |= w != 0;
  ends_allowed_ = complete() || !any;
  mask_fresh_ = true;
}

const std::vector<uint64_t>& ConstraintMatcher::allowed_tokens() {
  compute_mask();
  if (allowed_fresh_) return allowed_;
  const VocabIndex& v = *c_->vocab;
  allowed_.assign((static_cast<size_t>(v.num_logits()) + 63) / 64, 0);
  const std::vector<TokenId>& ids = v.sorted_ids();
  for (size_t i = 0; i < ids.size(); ++i)
    if (((*sorted_mask_)[i >> 6] >> (i & 63)) & 1) allowed_[static_cast<size_t>(ids[i]) >> 6] |= uint64_t{1} << (ids[i] & 63);
  if (ends_allowed_)
    for (TokenId e : v.end_ids())
      if (e >= 0 && e < v.num_logits()) allowed_[static_cast<size_t>(e) >> 6] |= uint64_t{1} << (e & 63);
  allowed_fresh_ = true;
  return allowed_;
}

void ConstraintMatcher::mask_logits(std::span<float> logits) {
  compute_mask();
  constexpr float kForbidden = -std::numeric_limits<float>::infinity();
  const VocabIndex& v = *c_->vocab;
  const std::vector<TokenId>& ids = v.sorted_ids();
  const std::vector<uint64_t>& sorted_mask = *sorted_mask_;
  size_t allowed = 0;
  for (uint64_t w : sorted_mask) allowed += static_cast<size_t>(__builtin_popcountll(w));
  const auto in_row = [&](TokenId id) { return id >= 0 && static_cast<size_t>(id) < logits.size(); };
  if (allowed * 2 < ids.size()) {
    // Few allowed (between JSON tokens, in a choice): keep their logits, forbid the whole row, put them back.
    kept_.clear();
    for (size_t w = 0; w < sorted_mask.size(); ++w)
      for (uint64_t word = sorted_mask[w]; word != 0; word &= word - 1) {
        const TokenId id = ids[w * 64 + static_cast<size_t>(__builtin_ctzll(word))];
        if (in_row(id)) kept_.push_back({id, logits[static_cast<size_t>(id)]});
      }
    if (ends_allowed_)
      for (TokenId e : v.end_ids())
        if (in_row(e)) kept_.push_back({e, logits[static_cast<size_t>(e)]});
    std::fill(logits.begin(), logits.end(), kForbidden);
    for (const auto& [id, logit] : kept_) logits[static_cast<size_t>(id)] = logit;
    return;
  }
  // Most allowed (inside a string): forbid the few that are not, and every token without text.
  for (size_t w = 0; w < sorted_mask.size(); ++w) {
    uint64_t missing = ~sorted_mask[w];
    if (w + 1 == sorted_mask.size() && ids.size() % 64 != 0) missing &= (uint64_t{1} << (ids.size() % 64)) - 1;
    for (; missing != 0; missing &= missing - 1) {
      const TokenId id = ids[w * 64 + static_cast<size_t>(__builtin_ctzll(missing))];
      if (in_row(id)) logits[static_cast<size_t>(id)] = kForbidden;
    }
  }
  for (TokenId id : v.textless_ids())
    if (in_row(id) && !(ends_allowed_ && is_end(v, id))) logits[static_cast<size_t>(id)] = kForbidden;
  for (size_t i = static_cast<size_t>(v.num_logits()); i < logits.size(); ++i) logits[i] = kForbidden;
}

bool ConstraintMatcher::accept(TokenId id) {
  const VocabIndex& v = *c_->vocab;
  if (id < 0 || id >= v.num_logits()) return false;
  if (is_end(v, id)) {
    // An end token is what the mask offered once complete, or when nothing else was possible.
    return complete() || (mask_fresh_ && ends_allowed_) || !error_.empty();
  }
  if (v.bytes(id).empty()) return false;
  // A token that made the stacks overflow was offered by the mask: taken, and the output ends next.
  return advance(v.bytes(id), /*commit=*/true) || !error_.empty();
}

bool ConstraintMatcher::allows(TokenId id) {
  const VocabIndex& v = *c_->vocab;
  if (id < 0 || id >= v.num_logits()) return false;
  if (is_end(v, id)) return complete();
  return !v.bytes(id).empty() && advance(v.bytes(id), /*commit=*/false);
}

bool ConstraintMatcher::advance(std::string_view bytes, bool commit) {
  const size_t mark = arena_.size();
  try {
    return advance_or_throw(bytes, commit);
  } catch (const InvalidRequest& e) {
    arena_.truncate(mark);
    error_ = e.what();
    return false;
  }
}

bool ConstraintMatcher::advance_or_throw(std::string_view bytes, bool commit) {
  StackSet stacks = stacks_;
  Utf8Cursor cursor = cursor_;
  const size_t mark = arena_.size();
  StackSet next;
  ExpansionBudget budget{c_->limits};  // one token's bytes (or a test's text)
  for (char c : bytes) {
    const Utf8Cursor::Step step = cursor.step(static_cast<uint8_t>(c));
    bool ok = step != Utf8Cursor::Step::kInvalid;
    if (ok && step == Utf8Cursor::Step::kPartial) {
      ok = any_top_intersects(c_->grammar, stacks, cursor.pending_lo(), cursor.pending_hi());
    } else if (ok) {
      advance_stacks(c_->grammar, arena_, stacks, cursor.code_point(), next, budget);
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
  mask_fresh_ = allowed_fresh_ = false;
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
