// A context-free grammar over Unicode code points, the form every output constraint compiles to (JSON
// schemas, regular expressions, choices). Rules have alternatives; an alternative is a sequence of symbols,
// each a set of code points or a reference to a rule. The matcher (grammar_matcher.h) runs it as a set of
// pushdown stacks, one code point at a time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pagoda/core/error.h"

namespace pagoda::structured {

struct CodepointRange {
  uint32_t lo = 0, hi = 0;  // inclusive
};

// A set of code points as sorted, disjoint, non-adjacent ranges.
class CharSet {
 public:
  CharSet() = default;
  static CharSet of(uint32_t cp) { return range(cp, cp); }
  static CharSet range(uint32_t lo, uint32_t hi);
  static CharSet any();  // every Unicode scalar value (surrogates excluded)
  CharSet& add(uint32_t lo, uint32_t hi);
  CharSet& add(const CharSet& other);
  CharSet minus(const CharSet& other) const;
  CharSet complement() const;  // within any()
  bool contains(uint32_t cp) const;
  bool intersects(uint32_t lo, uint32_t hi) const;
  bool contains_all(const CharSet& other) const;
  bool disjoint(const CharSet& other) const;
  bool empty() const { return ranges_.empty(); }
  uint32_t first() const { return ranges_.front().lo; }
  const std::vector<CodepointRange>& ranges() const { return ranges_; }
  std::string key() const;  // a canonical text form, for interning and caches

 private:
  std::vector<CodepointRange> ranges_;
  uint64_t ascii_[2] = {0, 0};  // contains() for code points below 128 without a search
  void rebuild_ascii();
};

struct Symbol {
  enum class Kind : uint8_t { kChars, kRule, kEnd };
  Kind kind = Kind::kEnd;
  int32_t index = -1;  // kChars: Grammar::char_sets(); kRule: the rule; kEnd: unused
};

// Built by GrammarBuilder; immutable afterwards, shared by every request using the same constraint.
// Alternatives are stored flat: each is a run of symbols closed by a kEnd, so a position in the grammar is
// one index into symbols().
class Grammar {
 public:
  int root() const { return root_; }
  const std::vector<Symbol>& symbols() const { return symbols_; }
  const std::vector<CharSet>& char_sets() const { return char_sets_; }
  // Start positions (into symbols()) of rule r's alternatives.
  const std::vector<int32_t>& alternatives(int r) const { return rules_[static_cast<size_t>(r)].alternatives; }
  const std::string& rule_name(int r) const { return rules_[static_cast<size_t>(r)].name; }
  int num_rules() const { return static_cast<int>(rules_.size()); }
  // Char sets that some rule repeats by tail recursion (x ::= C x | ...): the token-mask search accepts whole
  // vocabulary subtrees of such a set at once when the state is stable under it (token_mask.h).
  const std::vector<int32_t>& loop_sets() const { return loop_sets_; }

 private:
  friend class GrammarBuilder;
  struct Rule {
    std::string name;
    std::vector<int32_t> alternatives;
  };
  int root_ = 0;
  std::vector<Symbol> symbols_;
  std::vector<CharSet> char_sets_;
  std::vector<Rule> rules_;
  std::vector<int32_t> loop_sets_;
};

// What GrammarBuilder::build() throws for a grammar that matches no string at all (a rule that can never end,
// such as r ::= "a" r, reached from the root on every path).
class EmptyGrammar : public InvalidRequest {
 public:
  using InvalidRequest::InvalidRequest;
};

// Grammars are written rule by rule. A sequence is a std::vector<Symbol>; literal() spells a UTF-8 string.
// Adding more than kMaxGrammarSymbols symbols throws InvalidRequest.
// build() checks what the matcher relies on: every referenced rule has an alternative, and no rule can reach
// itself without consuming a code point through a call that pushes a frame (left recursion), which would
// make expansion loop. Cycles of calls in tail position (a repetition of something that may be empty)
// are fine. It drops every alternative that can never be completed (one that refers to a rule matching no
// finite string, or to an empty char set), so that every prefix the matcher accepts can be finished; when
// the root itself matches nothing it throws EmptyGrammar.
class GrammarBuilder {
 public:
  using Sequence = std::vector<Symbol>;

  int add_rule(std::string name);  // declared first, so that rules can refer to each other
  void add_alternative(int rule, Sequence sequence);
  int rule(std::string name, std::vector<Sequence> alternatives);  // add_rule + add_alternative each
  Symbol chars(const CharSet& set);  // interned
  static Symbol ref(int rule) { return {Symbol::Kind::kRule, rule}; }
  Sequence literal(std::string_view utf8);
  // x ::= item x | ε: zero or more of a sequence. A single char set item is recorded as a loop set.
  int star(std::string name, Sequence item);
  // item repeated min..max times (max < 0: unbounded); expanded into at most `max` nested rules.
  int repeat(std::string name, const Sequence& item, int min, int max);
  // Records a char set that some rule repeats by tail recursion, for the token-mask search's shortcut.
  void mark_loop_set(Symbol chars);
  int num_rules() const { return static_cast<int>(rules_.size()); }

  // Throws InvalidRequest naming the rule on a malformed grammar.
  Grammar build(int root);

 private:
  std::vector<std::string> names_;
  std::vector<std::vector<Sequence>> rules_;
  std::vector<CharSet> char_sets_;
  std::unordered_map<std::string, int32_t> char_set_ids_;  // by CharSet::key()
  std::vector<int32_t> loop_sets_;
  size_t num_symbols_ = 0;  // checked as rules are added, so that a hostile request cannot exhaust memory
};

// Grammars built from requests stay below this many symbols.
constexpr size_t kMaxGrammarSymbols = size_t{1} << 20;

}  // namespace pagoda::structured
