// Regular expressions as grammars, against std::regex (ECMAScript) as the reference: over random strings of
// a small alphabet, the grammar accepts a string whole exactly when std::regex_match does, and keeps every
// prefix of a matching string alive. Also the grammar checks (left recursion, size) and refusals.
#include "pagoda/structured/regex_grammar.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <regex>

#include "pagoda/core/error.h"
#include "pagoda/structured/constraint.h"
#include "pagoda/structured/json_schema_grammar.h"
#include "pagoda/structured/pushdown.h"

namespace pagoda::structured {
namespace {

std::shared_ptr<const VocabIndex> no_vocab() { return std::make_shared<const VocabIndex>(std::vector<std::string>{}, 0, std::vector<TokenId>{}); }

// Whether `grammar` accepts exactly `text`; `alive` says whether it is at least a prefix of a sentence.
bool full_match(const std::shared_ptr<const CompiledConstraint>& c, const std::string& text, bool* alive = nullptr) {
  ConstraintMatcher m(c);
  const bool ok = m.accept_bytes(text);
  if (alive != nullptr) *alive = ok;
  return ok && m.complete();
}

// Over `trials` random strings of `alphabet`, up to `max_len` long (half of them made of the pattern's own
// characters, so that matches are common): the grammar accepts a string whole exactly when std::regex_match does,
// and keeps every prefix of a match alive. Returns how many strings matched.
int expect_agrees_with_std_regex(const std::string& p, int trials, std::mt19937& rng,
                                 const std::string& alphabet = "abcxyz0129. _", int max_len = 6) {
  SCOPED_TRACE(p);
  const auto c = compile_constraint(regex_grammar(p), no_vocab(), "regex");
  const std::regex reference(p, std::regex::ECMAScript);
  int matched = 0;
  for (int trial = 0; trial < trials; ++trial) {
    std::string s;
    const int len = static_cast<int>(rng() % static_cast<unsigned>(max_len + 1));
    for (int i = 0; i < len; ++i) s += alphabet[rng() % alphabet.size()];
    if (trial % 2 == 0)
      for (char& ch : s) ch = p[rng() % p.size()];
    const bool expected = std::regex_match(s, reference);
    EXPECT_EQ(full_match(c, s), expected) << "text '" << s << "'";
    if (full_match(c, s) != expected) return matched;
    if (expected) {
      ++matched;
      for (size_t k = 0; k <= s.size(); ++k) {
        bool alive = false;
        full_match(c, s.substr(0, k), &alive);
        EXPECT_TRUE(alive) << "prefix '" << s.substr(0, k) << "' of '" << s << "'";
        if (!alive) return matched;
      }
    }
  }
  return matched;
}

TEST(RegexGrammar, AgreesWithStdRegexOnRandomStrings) {
  const std::vector<std::string> patterns = {
      "abc", "a|b|c", "a*", "a+b?", "(ab)*c", "[a-c]{2,3}", "a{2}", "a{1,}b", "[^a]*", "(a|bc)+",
      "\\d+(\\.\\d{1,2})?", "[abc]*c[ab]?", "(a*b*)*c", "(?:ab|a)(?:c|bc)", "x?y{0,2}z*", "[a-c\\d]+",
      "\\w\\s?\\W*", "a.c", "(a|)b", "((a|b)c){1,3}", "(a*)*b", "(a+)?c", "(a?)+b", "((a*)+)?", "(a?)?b",
      "(a+)+", "(ab?)*", "(a?){2}b", "(a+){2,3}", "(a*){3}b",
  };
  std::mt19937 rng(7);
  for (const std::string& p : patterns) {
    EXPECT_GT(expect_agrees_with_std_regex(p, 3000, rng), 0) << p << ": no random string matched, the check would prove nothing";
    if (HasFailure()) return;
  }
}

// The class the quantifier folding rewrites: every pair of nested quantifiers (simple, counted, lazy) around a
// character, a class and a group, twice nested, against std::regex. Folded or not, the language must not change.
TEST(RegexGrammar, NestedQuantifiersAgreeWithStdRegex) {
  const std::vector<std::string> atoms = {"a", "[ab]", "(ab)", "(a|b)"};
  const std::vector<std::string> quantifiers = {"*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}", "*?", "{0}"};
  std::mt19937 rng(11);
  int patterns = 0, matching = 0;  // patterns some string matched (long counts such as (ab){2}{2}c rarely do)
  for (const std::string& atom : atoms)
    for (const std::string& q1 : quantifiers)
      for (const std::string& q2 : quantifiers) {
        ++patterns;
        matching += expect_agrees_with_std_regex("(" + atom + q1 + ")" + q2 + "c", 400, rng, "abc", 9) > 0;
        if (HasFailure()) return;
      }
  EXPECT_GT(matching, patterns * 3 / 4) << "too few patterns matched a random string: the check would prove little";
}

TEST(RegexGrammar, UnicodeClassesAndMultiByteCharacters) {
  const auto c = compile_constraint(regex_grammar("[α-ω]+é?"), no_vocab(), "regex");
  EXPECT_TRUE(full_match(c, "αβγ"));
  EXPECT_TRUE(full_match(c, "ωé"));
  EXPECT_FALSE(full_match(c, "aé"));
  bool alive = false;
  EXPECT_FALSE(full_match(c, std::string("\xCE"), &alive));  // half of "α": still a prefix
  EXPECT_TRUE(alive);
  EXPECT_FALSE(full_match(c, std::string("\xC3"), &alive));  // half of a Latin letter outside the class
  EXPECT_FALSE(alive);
}

// Python reads a{,3} as a{0,3} and a{,} as a*; {} and a brace without a count are literal (found by a hostile sweep:
// a{,3}b was read as the text "a{,3}b").
TEST(RegexGrammar, PythonsOmittedLowerBound) {
  const auto c = compile_constraint(regex_grammar("a{,3}b"), no_vocab(), "regex");
  for (const char* s : {"b", "ab", "aaab"}) EXPECT_TRUE(full_match(c, s)) << s;
  for (const char* s : {"aaaab", "a{,3}b"}) EXPECT_FALSE(full_match(c, s)) << s;
  const auto any = compile_constraint(regex_grammar("xa{,}"), no_vocab(), "regex");
  EXPECT_TRUE(full_match(any, "xaaaaa"));
  const auto literal = compile_constraint(regex_grammar("a{}b{x}"), no_vocab(), "regex");
  EXPECT_TRUE(full_match(literal, "a{}b{x}"));
}

TEST(RegexGrammar, RefusesWhatAGrammarCannotExpress) {
  for (const char* p : {"(a)\\1", "a(?=b)", "a(?!b)", "\\bword", "a{3,2}", "(ab", "ab)", "*a", "[z-a]", "a$b"}) {
    SCOPED_TRACE(p);
    EXPECT_THROW(regex_grammar(p), InvalidRequest);
  }
}

TEST(RegexGrammar, NestedSimpleQuantifiersFoldIntoOne) {
  // A *, + or ? of a *, + or ? is one repetition (the languages agree with std::regex above): 40 stars on one
  // character build the rules of one star, where each star was a rule of its own whose parses all stayed alive
  // (a fuzzer's input of such runs took up to 1.4 s of token masks for a 16-token walk).
  const int one = regex_grammar("o*1").num_rules();
  EXPECT_EQ(regex_grammar("o" + std::string(40, '*') + "1").num_rules(), one);
  EXPECT_EQ(regex_grammar("((o+)?)*1").num_rules(), one);
  EXPECT_EQ(regex_grammar("o*+?*1").num_rules(), one);  // possessive and lazy marks are read, not repeated
  EXPECT_LT(regex_grammar("(o{2})*1").num_rules(), 100);  // a counted repetition inside is kept as it is
  const auto c = compile_constraint(regex_grammar("(o?)?1"), no_vocab(), "regex");
  EXPECT_TRUE(full_match(c, "o1"));
  EXPECT_TRUE(full_match(c, "1"));
  EXPECT_FALSE(full_match(c, "oo1"));
  EXPECT_EQ(regex_grammar("o*{586}{86}{586}1").num_rules(), one);  // counts of a star: a fuzzer's 13 s timeout
  EXPECT_LT(regex_grammar("(o?){100}{100}1").num_rules(), 5000);  // a product past the largest count: nested
  const auto e = compile_constraint(regex_grammar("(o+){2,3}1"), no_vocab(), "regex");
  EXPECT_TRUE(full_match(e, "oooooo1"));
  EXPECT_FALSE(full_match(e, "o1"));
  const auto f = compile_constraint(regex_grammar("(o?){2}1"), no_vocab(), "regex");
  EXPECT_TRUE(full_match(f, "oo1"));
  EXPECT_TRUE(full_match(f, "1"));
  EXPECT_FALSE(full_match(f, "ooo1"));
  const auto d = compile_constraint(regex_grammar("(o{2})*1"), no_vocab(), "regex");
  EXPECT_TRUE(full_match(d, "oooo1"));
  EXPECT_FALSE(full_match(d, "ooo1"));
}

TEST(RegexGrammar, HugeRepetitionsAreRefusedNotBuilt) {
  EXPECT_THROW(regex_grammar("a{100000}"), InvalidRequest);
  // Nested counts multiply the language, not the grammar: four levels of 999 are about 4,000 rules.
  EXPECT_LT(regex_grammar("((((a{999}){999}){999}){999})").num_rules(), 5000);
}

// A pattern of more characters than the grammar may hold symbols is refused by the parser as it passes the limit,
// not after its whole tree is built (a 16 MB literal took 18 s and 2.2 GB to be refused by the grammar builder);
// one character fewer than the limit parses (the builder then decides what else it adds).
TEST(RegexGrammar, PatternsOfMoreCharactersThanTheGrammarMayHoldAreRefusedWhileParsed) {
  const std::string over(kMaxGrammarSymbols + 1, 'a');
  for (const std::string& p : {over, "(" + over + ")", "[ab]" + over, "x|" + over}) {
    try {
      (void)regex_grammar(p);
      ADD_FAILURE() << "a pattern of " << p.size() << " characters was accepted";
    } catch (const InvalidRequest& e) {
      EXPECT_NE(std::string(e.what()).find("more than 1048576 characters and classes"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW((void)json_schema_grammar({{"type", "string"}, {"pattern", over}}), InvalidRequest);
}

TEST(RegexGrammar, NestedCountsOfWhatMayBeEmptyAreRefusedPastTheirLimit) {
  // A count of none matches the empty string alone, and so does every count of it: one empty sequence, no rule
  // per copy (x{0}{929}{86}{5} once built 399,470 empty rules; x?{0}{929}{86} 79,894, a 24 s fuzzer's walk).
  for (const char* p : {"ax{0}{929}{86}{5}b", "a(b?){0}{929}{86}b", "a(ab?){0}{500}{500}b", "ab{0}b", "a(){5}{7}b",
                        "a(|){929}{86}b", "a(x{0}|()|(y{0}){3}){929}{86}{5}b", "a(x{0}()){929}+{86}*b"}) {
    SCOPED_TRACE(p);
    EXPECT_EQ(regex_grammar(p).num_rules(), regex_grammar("ab").num_rules());
    const auto c = compile_constraint(regex_grammar(p), no_vocab(), "regex");
    EXPECT_TRUE(full_match(c, "ab"));
    EXPECT_FALSE(full_match(c, "abb"));
    EXPECT_FALSE(full_match(c, "axb"));
  }
  // Copies of the innermost item through counts whose item may be empty: refused past 100,000 (a fuzzer's
  // x?{929}{86}{929}{86}{5}; 173 x 86 x 58; 20 x 100 x 60 through a group that may be empty).
  for (const char* p : {"x?{929}{86}{929}{86}{5}", "x?{173}{86}{58}", "((x?){20}y?){100}{60}", "(a?){1000}{1000}",
                        "z(x?y?){100}{100}{11}z"}) {
    SCOPED_TRACE(p);
    try {
      (void)regex_grammar(p);
      ADD_FAILURE() << "not refused";
    } catch (const InvalidRequest& e) {
      EXPECT_NE(std::string(e.what()).find("nested counted repetitions"), std::string::npos) << e.what();
    }
  }
  // At the limit, or items that cannot be empty (each count then advances only with text), or loops rather than
  // counts: taken, and right.
  for (const char* p : {"(x?){100}{1000}", "(ab?){1000}{1000}", "((((a{999}){999}){999}){999})", "(\\s*\\w*)*x",
                        "(a?b?){3}{4}c"}) {
    SCOPED_TRACE(p);
    EXPECT_NO_THROW((void)regex_grammar(p));
  }
  const auto c = compile_constraint(regex_grammar("(a?b?){3}{4}c"), no_vocab(), "regex");
  EXPECT_TRUE(full_match(c, "abababababababababababab" "c"));  // 12 copies of ab
  EXPECT_FALSE(full_match(c, "ababababababababababababab" "c"));  // 13
  EXPECT_TRUE(full_match(c, "bac"));
}

TEST(RegexGrammar, LongChainsOfRepetitionsAreRefusedNotRecursedOn) {
  // 100,000 counts in a row on one letter (300 KB of pattern) crashed the parser's recursions over the tree.
  std::string chain = "a";
  for (int i = 0; i < 100000; ++i) chain += "{2}";
  EXPECT_THROW((void)regex_grammar(chain), InvalidRequest);
  std::string lazy = "a";
  for (int i = 0; i < 50000; ++i) lazy += "{2}?";
  EXPECT_THROW((void)regex_grammar(lazy), InvalidRequest);
  // The tallest tree the limit lets through (256 levels: 85 nested groups, each a concatenation under two counts
  // that do not fold, around a two-letter concatenation) is parsed, compiled and followed without running out of
  // stack, under ASan too (1,700 levels overflowed it there); one more count is refused. A JSON schema's "pattern"
  // goes through the same parser.
  std::string deep;
  for (int i = 0; i < 85; ++i) deep += "(b";
  deep += "c";
  for (int i = 0; i < 85; ++i) deep += "){1,2}{1,2}";
  ConstraintMatcher m(compile_constraint(regex_grammar(deep), no_vocab(), "regex"));
  EXPECT_TRUE(m.accept_bytes(std::string(85, 'b') + "c"));
  EXPECT_TRUE(m.complete());
  EXPECT_THROW((void)regex_grammar(deep + "{1,2}"), InvalidRequest);
  EXPECT_THROW((void)json_schema_grammar({{"type", "string"}, {"pattern", chain}}), InvalidRequest);
  // A few in a row are taken (Python refuses even two), and folds add no level: "a??????" is one repetition.
  const auto c = compile_constraint(regex_grammar("(ab){2}{3}x??????y"), no_vocab(), "regex");
  EXPECT_TRUE(full_match(c, "abababababab" "xy"));
  EXPECT_FALSE(full_match(c, "abababab" "y"));
  EXPECT_TRUE(full_match(c, "abababababab" "y"));
}

TEST(Grammar, RepeatingSomethingEmptyIsNotLeftRecursion) {
  const auto c = compile_constraint(regex_grammar("(a*b*)*c"), no_vocab(), "regex");
  EXPECT_TRUE(full_match(c, "abbac"));
  EXPECT_TRUE(full_match(c, "c"));
}

TEST(Grammar, NestedRepetitionsOfTheEmptyKeepOneStackEach) {
  // "e" then 50 stars: each level is a rule that may be empty. Equal stacks under fresh return frames once
  // doubled with every character (a fuzzer's 40-second input); frames are now hash-consed.
  const auto c = compile_constraint(regex_grammar("e" + std::string(50, '*') + "x"), no_vocab(), "regex");
  ConstraintMatcher m(c);
  ASSERT_TRUE(m.accept_bytes(std::string(200, 'e')));
  EXPECT_TRUE(m.accept_bytes("x"));
  EXPECT_TRUE(m.complete());
}

TEST(Grammar, ExpansionBudgetStopsTheStackSearchAtEitherLimit) {
  const Grammar g = regex_grammar("(ab|ac|ad|e?)*f");
  StackArena arena;
  ExpansionBudget roomy;
  const StackSet start = initial_stacks(g, arena, roomy);
  ASSERT_GT(roomy.frames, 1u);
  ASSERT_GT(start.tops.size(), 1u);
  ExpansionBudget few_frames;
  few_frames.limits.frames = roomy.frames - 1;
  EXPECT_THROW((void)initial_stacks(g, arena, few_frames), InvalidRequest);
  StackSet next;
  ExpansionBudget enough;
  advance_stacks(g, arena, start, 'a', next, enough);
  EXPECT_EQ(enough.tops, start.tops.size());
  ExpansionBudget few_tops;
  few_tops.limits.tops = start.tops.size() - 1;
  try {
    advance_stacks(g, arena, start, 'a', next, few_tops);
    ADD_FAILURE() << "no throw";
  } catch (const InvalidRequest& e) {
    EXPECT_NE(std::string(e.what()).find("too costly"), std::string::npos) << e.what();
  }
  StackArena fresh;
  ExpansionBudget small_arena;
  small_arena.limits.arena = 0;  // the start pushes return frames: (ab|ac|ad|e?)* calls its group before f
  EXPECT_THROW((void)initial_stacks(g, fresh, small_arena), InvalidRequest);
}

TEST(Grammar, LeftRecursionThroughATailCallIsRefused) {
  GrammarBuilder b;  // r ::= s "x"; s ::= r | "y": r pushes a frame, then reaches itself
  const int r = b.add_rule("r");
  const int s = b.add_rule("s");
  b.add_alternative(r, {GrammarBuilder::ref(s), b.chars(CharSet::of('x'))});
  b.add_alternative(s, {GrammarBuilder::ref(r)});
  b.add_alternative(s, b.literal("y"));
  EXPECT_THROW(b.build(r), InvalidRequest);
}

TEST(Grammar, LeftRecursionIsRefused) {
  GrammarBuilder b;
  const int r = b.add_rule("r");
  const int s = b.add_rule("s");
  b.add_alternative(r, {GrammarBuilder::ref(s), b.chars(CharSet::of('x'))});
  b.add_alternative(s, {GrammarBuilder::ref(r)});
  b.add_alternative(s, {});
  EXPECT_THROW(b.build(r), InvalidRequest);
}

TEST(Grammar, CharSetAlgebra) {
  CharSet s = CharSet::range('a', 'f');
  s.add('x', 'z').add('g', 'h');  // merges with a-f
  EXPECT_EQ(s.ranges().size(), 2u);
  EXPECT_TRUE(s.contains('h'));
  EXPECT_FALSE(s.contains('i'));
  const CharSet m = s.minus(CharSet::range('c', 'y'));
  EXPECT_TRUE(m.contains('b'));
  EXPECT_FALSE(m.contains('c'));
  EXPECT_TRUE(m.contains('z'));
  EXPECT_TRUE(CharSet::any().contains_all(s));
  EXPECT_TRUE(s.complement().disjoint(s));
  EXPECT_FALSE(CharSet::any().contains(0xD800));  // surrogates are not characters
}

}  // namespace
}  // namespace pagoda::structured
