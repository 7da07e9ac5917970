// Regular expressions (vLLM's guided_regex, JSON Schema's `pattern`) as grammar rules. The syntax is the
// common subset of Python's `re` and ECMAScript: literals and escapes, `.`, classes `[...]` with ranges and
// negation, \d \w \s (ASCII) and their negations, groups `(...)`, `(?:...)` and named groups, alternation,
// and the quantifiers * + ? {n} {n,} {n,m} (lazy and possessive forms match the same language). `^` and `$`
// are accepted at the ends of the pattern. Backreferences, lookaround and word boundaries cannot be
// expressed by a context-free grammar: they are an InvalidRequest naming the construct.
#pragma once

#include <string_view>

#include "pagoda/structured/grammar.h"

namespace pagoda::structured {

enum class RegexText {
  kRaw,         // the output text itself matches
  kJsonString,  // the text between a JSON string's quotes matches once unescaped: '"', '\' and control
                // characters are written as JSON escapes
};

// Adds the rules of `pattern` to `b` and returns the sequence that matches it. `search`: JSON Schema's
// semantics, where the pattern may match anywhere in the string unless anchored with ^ and $; otherwise
// the whole text must match (vLLM's guided_regex).
GrammarBuilder::Sequence add_regex(GrammarBuilder& b, std::string_view pattern, RegexText text, bool search);

// The grammar of texts that match `pattern` whole.
Grammar regex_grammar(std::string_view pattern);

}  // namespace pagoda::structured
