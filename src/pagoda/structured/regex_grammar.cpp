// Regular expressions to grammar rules (regex_grammar.h): a recursive-descent parser to a small tree, then
// one rule per alternation and repetition.
#include "pagoda/structured/regex_grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "pagoda/core/error.h"

namespace pagoda::structured {
namespace {

constexpr int kMaxDepth = 100;         // nesting of groups
constexpr int kMaxRepeat = 1000;       // n and m in {n,m}
constexpr int64_t kMaxNestedCopies = 100'000;  // Parser::nested_copies
// Levels of the parsed tree: every recursion over it (nested_copies, the grammar emitter) goes this deep. 100 groups
// under 16 counts each (1,700 levels) overflowed the 8 MB stack of the emitter under ASan (about 6 KB a frame there).
constexpr int kMaxHeight = 256;

struct Node {
  enum class Kind { kChars, kConcat, kAlt, kRepeat };
  explicit Node(Kind k) : kind(k) {}
  Kind kind;
  CharSet chars{};
  std::vector<Node> kids{};
  int min = 0, max = -1;  // kRepeat; max -1: unbounded
  int height = 1;         // levels of the tree from this node down
  bool only_empty = false;  // matches the empty string and nothing else ("", "()", "x{0}", "(|){5}")
};

[[noreturn]] void fail(std::string_view pattern, const std::string& why) {
  throw InvalidRequest(fmt::format("regular expression '{}': {}", pattern.substr(0, 200), why));
}

CharSet digits() { return CharSet::range('0', '9'); }
CharSet word() {
  CharSet s = CharSet::range('0', '9');
  s.add('a', 'z').add('A', 'Z').add('_', '_');
  return s;
}
CharSet space() {
  CharSet s = CharSet::range('\t', '\r');
  s.add(' ', ' ');
  return s;
}

class Parser {
 public:
  explicit Parser(std::string_view p) : p_(p) {}

  Node parse(bool& anchored_start, bool& anchored_end) {
    anchored_start = !p_.empty() && p_[0] == '^';
    if (anchored_start) ++i_;
    Node n = alternation(0);
    if (i_ < p_.size()) fail(p_, fmt::format("unexpected '{}' at offset {}", p_[i_], i_));
    if (nested_copies(n).copies > kMaxNestedCopies)
      fail(p_, fmt::format("nested counted repetitions of something that may be empty repeat it more than {} times "
                           "(not supported)", kMaxNestedCopies));
    anchored_end = anchored_end_;
    return n;
  }

 private:
  std::string_view p_;
  size_t i_ = 0;
  bool anchored_end_ = false;
  size_t leaves_ = 0;  // characters and classes parsed so far

  bool more() const { return i_ < p_.size(); }
  char peek() const { return p_[i_]; }

  uint32_t code_point() {  // one UTF-8 character of the pattern
    const auto b = static_cast<unsigned char>(p_[i_]);
    const int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    if (i_ + static_cast<size_t>(n) > p_.size()) fail(p_, "invalid UTF-8");
    uint32_t cp = n == 1 ? b : n == 2 ? b & 0x1Fu : n == 3 ? b & 0x0Fu : b & 0x07u;
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(p_[i_ + static_cast<size_t>(k)]) & 0x3Fu);
    i_ += static_cast<size_t>(n);
    return cp;
  }

  Node alternation(int depth) {
    if (depth > kMaxDepth) fail(p_, "groups nested too deeply");
    Node alt(Node::Kind::kAlt);
    alt.kids.push_back(concatenation(depth));
    while (more() && peek() == '|') {
      ++i_;
      alt.kids.push_back(concatenation(depth));
    }
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    seal(alt);
    return alt;
  }

  Node concatenation(int depth) {
    Node seq(Node::Kind::kConcat);
    while (more() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        ++i_;
        if (i_ != p_.size()) fail(p_, "'$' is supported only at the end of the pattern");
        anchored_end_ = true;
        break;
      }
      if (peek() == '^') fail(p_, "'^' is supported only at the start of the pattern");
      Node atom_node = atom(depth);
      quantifiers(atom_node);
      seq.kids.push_back(std::move(atom_node));
    }
    // A one-element sequence is that element, so that a group around a repetition is the repetition itself
    // (the quantifier folding below sees "(x*)*" as "x**").
    if (seq.kids.size() == 1) return std::move(seq.kids[0]);
    seal(seq);
    return seq;
  }

  // Sets a node's height from its kids' and refuses a tree taller than kMaxHeight: "a{2}{2}..." 100,000 times (a
  // 300 KB pattern) overflowed the stack of every recursion over the tree, a crash before the grammar was built.
  // Also whether it matches only the empty string: a sequence or an alternation all of whose parts do (none at all
  // included), or a repetition of such a part.
  void seal(Node& n) const {
    int below = 0;
    n.only_empty = n.kind != Node::Kind::kChars;
    for (const Node& k : n.kids) {
      below = std::max(below, k.height);
      n.only_empty = n.only_empty && k.only_empty;
    }
    n.height = below + 1;
    if (n.height > kMaxHeight)
      fail(p_, fmt::format("groups and repetitions nested more than {} levels deep (at offset {})", kMaxHeight, i_));
  }

  // How many copies of their innermost item counted repetitions nested through things that may be empty hold:
  // a count is a chain of rules, one return frame each, and when the item inside may be empty one closure of the
  // stack search (pushdown.h) walks through every frame of every count above it ("x?{929}{86}{929}" would keep 74
  // million; a fuzzer's inputs of that kind took 10 to 25 s a mask before ExpansionBudget cut them off, and 2 s
  // after, under ASan). An unbounded repetition is a loop, not a chain: it counts its minimum and one more.
  // Each node's nullability comes out of the same pass.
  struct NestedCopies {
    bool nullable = false;  // the node may match the empty string
    int64_t copies = 1;     // capped at kMaxNestedCopies + 1
  };
  static NestedCopies nested_copies(const Node& n) {
    if (n.kind == Node::Kind::kRepeat) {
      const NestedCopies item = nested_copies(n.kids[0]);
      const int64_t chain = n.max < 0 ? int64_t{n.min} + 1 : n.max;  // at least 1: x{0} is parsed as nothing
      return {n.min == 0 || item.nullable,
              item.nullable ? std::min(chain * item.copies, kMaxNestedCopies + 1) : std::max(chain, item.copies)};
    }
    NestedCopies out{n.kind == Node::Kind::kConcat, 1};  // kChars: never empty; a concatenation while all parts may be
    for (const Node& k : n.kids) {
      const NestedCopies kid = nested_copies(k);
      out.copies = std::max(out.copies, kid.copies);
      out.nullable = n.kind == Node::Kind::kConcat ? out.nullable && kid.nullable : out.nullable || kid.nullable;
    }
    return out;
  }

  // Whether a repetition is *, + or ? (or their brace forms): a minimum of 0 or 1 and a maximum of 1 or none.
  static bool simple_repeat(int min, int max) { return (min == 0 || min == 1) && (max == 1 || max < 0); }

  void quantifiers(Node& n) {
    while (more()) {
      int min = 0, max = -1;
      const char c = peek();
      if (c == '*') {
        ++i_;
      } else if (c == '+') {
        ++i_;
        min = 1;
      } else if (c == '?') {
        ++i_;
        max = 1;
      } else if (c == '{' && braces(min, max)) {
      } else {
        return;
      }
      if (more() && (peek() == '?' || peek() == '+')) ++i_;  // lazy, possessive: the same language
      // x{0} matches only the empty string, and so does any count of something that only does: one empty
      // sequence, not a rule per copy ("x?{0}{929}{86}" built 79,894 empty rules, each walked through by every
      // closure: 24 s of a fuzzer's walk; "(|){929}{86}" the same through an alternation).
      if (max == 0 || n.only_empty) {
        n = Node(Node::Kind::kConcat);
        seal(n);
        continue;
      }
      // A *, + or ? (or any count) of a *, + or ?: one repetition with the product of the minimums and of the
      // maximums, the same language ("x**" is "x*", "(x+)?" is "x*", "(x?)?" is "x?"). Nested repetitions of things that may be
      // empty keep many equal parses alive: a 133-byte pattern of them took 0.3 to 1.4 s of token masks a
      // 16-token walk (fuzz_structured's timeout input, `RegexGrammar.NestedSimpleQuantifiersFoldIntoOne`).
      // Also a count of a *, + or ?: (x*){n,m} is x*, (x+){n,m} is x{n,}, (x?){n,m} is x{0,m} (each copy adds 0 or
      // 1 at a time, so every count between the products is reached). "R*{586}{86}{586}" built 586 x 86 x 586
      // nullable copies whose parses the stack search all expanded (a 13 s fuzzer timeout).
      // Only where the product stays a count the grammar builds as one (nested counts multiply the language, not
      // the grammar: "(a?){1000}{1000}" stays nested).
      const int64_t folded_min = int64_t{n.min} * min;
      const int64_t folded_max = n.max < 0 || max < 0 ? -1 : int64_t{n.max} * max;
      if (n.kind == Node::Kind::kRepeat && simple_repeat(n.min, n.max) && max != 0 && folded_min <= kMaxRepeat &&
          folded_max <= kMaxRepeat) {
        n.min = static_cast<int>(folded_min);
        n.max = static_cast<int>(folded_max);
        continue;
      }
      Node r(Node::Kind::kRepeat);  // a level of the tree (Python refuses any two quantifiers in a row)
      r.min = min;
      r.max = max;
      r.kids.push_back(std::move(n));
      seal(r);
      n = std::move(r);
    }
  }

  // {n}, {n,}, {n,m}; false (nothing consumed) when the brace is a literal, as Python reads "a{x".
  bool braces(int& min, int& max) {
    size_t j = i_ + 1;
    auto number = [&](int& out) {
      const size_t start = j;
      long v = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') {
        v = v * 10 + (p_[j++] - '0');
        if (v > kMaxRepeat) fail(p_, fmt::format("repetition counts above {} are not supported", kMaxRepeat));
      }
      out = static_cast<int>(v);
      return j > start;
    };
    // Python's forms: {n}, {n,}, {n,m}, and {,m} / {,} with the lower bound omitted (0); anything else is literal.
    if (!number(min)) {
      if (j >= p_.size() || p_[j] != ',') return false;
      min = 0;
    }
    max = min;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      max = -1;
      if (j < p_.size() && p_[j] != '}' && !number(max)) return false;
    }
    if (j >= p_.size() || p_[j] != '}') return false;
    if (max >= 0 && max < min) fail(p_, "a repetition {n,m} with m < n");
    i_ = j + 1;
    return true;
  }

  // Every character or class becomes a symbol of the grammar (none is dropped but inside an "x{0}"), so a pattern
  // of more than kMaxGrammarSymbols of them cannot fit: refused as it passes the limit, before its tree (about 140
  // bytes a character) is built whole. A 16 MB literal took 18 s and 2.2 GB to reach the grammar builder's refusal.
  Node chars(CharSet s) {
    if (++leaves_ > kMaxGrammarSymbols)
      fail(p_, fmt::format("more than {} characters and classes, over the grammar's limit of as many symbols",
                           kMaxGrammarSymbols));
    Node n(Node::Kind::kChars);
    n.chars = std::move(s);
    return n;
  }

  Node atom(int depth) {
    const char c = peek();
    if (c == '(') {
      ++i_;
      if (more() && peek() == '?') {
        ++i_;
        if (more() && peek() == ':') {
          ++i_;
        } else if (more() && (peek() == 'P' || peek() == '<') && !(peek() == '<' && i_ + 1 < p_.size() &&
                                                                   (p_[i_ + 1] == '=' || p_[i_ + 1] == '!'))) {
          if (peek() == 'P') ++i_;
          if (!more() || peek() != '<') fail(p_, "unsupported group syntax");
          while (more() && peek() != '>') ++i_;
          if (!more()) fail(p_, "unterminated group name");
          ++i_;
        } else {
          fail(p_, "lookaround and inline flags are not supported");
        }
      }
      Node inner = alternation(depth + 1);
      if (!more() || peek() != ')') fail(p_, "missing ')'");
      ++i_;
      return inner;
    }
    if (c == '[') return chars(bracket());
    if (c == '.') {
      ++i_;
      return chars(CharSet::any().minus(CharSet::of('\n')));
    }
    if (c == '\\') return chars(escape(false));
    if (c == '*' || c == '+' || c == '?') fail(p_, fmt::format("nothing to repeat at offset {}", i_));
    if (c == ')') fail(p_, "unbalanced ')'");
    return chars(CharSet::of(code_point()));
  }

  CharSet escape(bool in_class) {
    ++i_;  // the backslash
    if (!more()) fail(p_, "a trailing backslash");
    const char c = peek();
    auto hex = [&](int digits) {
      uint32_t v = 0;
      for (int k = 0; k < digits; ++k) {
        if (!more() || !std::isxdigit(static_cast<unsigned char>(peek()))) fail(p_, "a bad hexadecimal escape");
        const char h = peek();
        v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
        ++i_;
      }
      return v;
    };
    switch (c) {
      case 'd': ++i_; return digits();
      case 'D': ++i_; return digits().complement();
      case 'w': ++i_; return word();
      case 'W': ++i_; return word().complement();
      case 's': ++i_; return space();
      case 'S': ++i_; return space().complement();
      case 'n': ++i_; return CharSet::of('\n');
      case 't': ++i_; return CharSet::of('\t');
      case 'r': ++i_; return CharSet::of('\r');
      case 'f': ++i_; return CharSet::of('\f');
      case 'v': ++i_; return CharSet::of('\v');
      case '0': ++i_; return CharSet::of(0);
      case 'x': ++i_; return CharSet::of(hex(2));
      case 'u': ++i_; return CharSet::of(hex(4));
      case 'b':
        if (in_class) {
          ++i_;
          return CharSet::of('\b');
        }
        fail(p_, "word boundaries (\\b) are not supported");
      default:
        break;
    }
    if (c >= '1' && c <= '9') fail(p_, "backreferences are not supported");
    if (std::isalnum(static_cast<unsigned char>(c))) fail(p_, fmt::format("unsupported escape '\\{}'", c));
    return CharSet::of(code_point());  // an escaped punctuation or other character stands for itself
  }

  CharSet bracket() {
    ++i_;  // '['
    bool negate = false;
    if (more() && peek() == '^') {
      negate = true;
      ++i_;
    }
    CharSet set;
    bool first = true;
    while (more() && (peek() != ']' || first)) {
      first = false;
      CharSet item;
      uint32_t lo = 0;
      bool single = false;
      if (peek() == '\\') {
        item = escape(true);
        single = item.ranges().size() == 1 && item.ranges()[0].lo == item.ranges()[0].hi;
        if (single) lo = item.first();
      } else {
        lo = code_point();
        item = CharSet::of(lo);
        single = true;
      }
      if (single && i_ + 1 < p_.size() && peek() == '-' && p_[i_ + 1] != ']') {
        ++i_;
        uint32_t hi = 0;
        if (peek() == '\\') {
          const CharSet e = escape(true);
          if (e.ranges().size() != 1 || e.ranges()[0].lo != e.ranges()[0].hi) fail(p_, "a class used as a range bound");
          hi = e.first();
        } else {
          hi = code_point();
        }
        if (hi < lo) fail(p_, "a character range out of order");
        item = CharSet::range(lo, hi);
      }
      set.add(item);
    }
    if (!more()) fail(p_, "missing ']'");
    ++i_;
    return negate ? set.complement() : set;
  }
};

class Emitter {
 public:
  Emitter(GrammarBuilder& b, RegexText text) : b_(b), text_(text) {}

  GrammarBuilder::Sequence emit(const Node& n) {
    switch (n.kind) {
      case Node::Kind::kChars:
        return char_sequence(n.chars);
      case Node::Kind::kConcat: {
        GrammarBuilder::Sequence seq;
        for (const Node& k : n.kids) {
          GrammarBuilder::Sequence part = emit(k);
          seq.insert(seq.end(), part.begin(), part.end());
        }
        return seq;
      }
      case Node::Kind::kAlt: {
        std::vector<GrammarBuilder::Sequence> alts;
        for (const Node& k : n.kids) alts.push_back(emit(k));
        return {GrammarBuilder::ref(b_.rule(name("alt"), std::move(alts)))};
      }
      case Node::Kind::kRepeat: {
        const Node& k = n.kids[0];
        if (k.kind == Node::Kind::kChars && n.max < 0 && text_ == RegexText::kJsonString) {
          // x ::= plain x | escape x | ... with the plain part a loop set, then the minimum in front.
          const int loop = b_.add_rule(name("loop"));
          for (GrammarBuilder::Sequence alt : json_alternatives(k.chars)) {
            if (alt.size() == 1) b_.mark_loop_set(alt[0]);
            alt.push_back(GrammarBuilder::ref(loop));
            b_.add_alternative(loop, std::move(alt));
          }
          b_.add_alternative(loop, {});
          GrammarBuilder::Sequence seq;
          const GrammarBuilder::Sequence one = emit(k);
          for (int i = 0; i < n.min; ++i) seq.insert(seq.end(), one.begin(), one.end());
          seq.push_back(GrammarBuilder::ref(loop));
          return seq;
        }
        return {GrammarBuilder::ref(b_.repeat(name("repeat"), emit(k), n.min, n.max))};
      }
    }
    return {};
  }

  // The alternatives spelling one character of `s`: the raw characters, or in a JSON string, those that
  // need no escape as one set and the others as their escapes.
  std::vector<GrammarBuilder::Sequence> json_alternatives(const CharSet& s) {
    CharSet special = CharSet::range(0, 0x1F);
    special.add('"', '"').add('\\', '\\');
    std::vector<GrammarBuilder::Sequence> alts;
    const CharSet plain = s.minus(special);
    if (!plain.empty()) alts.push_back({b_.chars(plain)});
    for (const CodepointRange& r : s.ranges()) {
      for (uint32_t c = r.lo; c <= std::min<uint32_t>(r.hi, 0x5C); ++c) {
        if (!special.contains(c)) continue;
        std::string esc;
        switch (c) {
          case '"': esc = "\\\""; break;
          case '\\': esc = "\\\\"; break;
          case '\n': esc = "\\n"; break;
          case '\t': esc = "\\t"; break;
          case '\r': esc = "\\r"; break;
          case '\b': esc = "\\b"; break;
          case '\f': esc = "\\f"; break;
          default: esc = fmt::format("\\u{:04x}", c);
        }
        alts.push_back(b_.literal(esc));
      }
    }
    if (alts.empty()) throw InvalidRequest("a regular expression needs a character class that is empty");
    return alts;
  }

 private:
  GrammarBuilder& b_;
  RegexText text_;
  int counter_ = 0;

  std::string name(const char* what) { return fmt::format("regex_{}_{}", what, counter_++); }

  GrammarBuilder::Sequence char_sequence(const CharSet& s) {
    if (s.empty()) throw InvalidRequest("a regular expression needs a character class that is empty");
    if (text_ == RegexText::kRaw) return {b_.chars(s)};
    std::vector<GrammarBuilder::Sequence> alts = json_alternatives(s);
    if (alts.size() == 1) return alts[0];
    return {GrammarBuilder::ref(b_.rule(name("char"), std::move(alts)))};
  }
};

}  // namespace

GrammarBuilder::Sequence add_regex(GrammarBuilder& b, std::string_view pattern, RegexText text, bool search) {
  bool anchored_start = false, anchored_end = false;
  Node tree = Parser(pattern).parse(anchored_start, anchored_end);
  if (search && (!anchored_start || !anchored_end)) {
    Node any(Node::Kind::kRepeat);
    Node any_char(Node::Kind::kChars);
    any_char.chars = CharSet::any();
    any.kids.push_back(std::move(any_char));
    Node wrapped(Node::Kind::kConcat);
    if (!anchored_start) wrapped.kids.push_back(any);
    wrapped.kids.push_back(std::move(tree));
    if (!anchored_end) wrapped.kids.push_back(any);
    tree = std::move(wrapped);
  }
  return Emitter(b, text).emit(tree);
}

Grammar regex_grammar(std::string_view pattern) {
  GrammarBuilder b;
  const int root = b.add_rule("root");
  b.add_alternative(root, add_regex(b, pattern, RegexText::kRaw, /*search=*/false));
  return b.build(root);
}

}  // namespace pagoda::structured
