// jinja lexer: splits template source into text and tag tokens, applying jinja2's whitespace rules as
// transformers configures them (trim_blocks, lstrip_blocks, "-"/"+" tag modifiers, comments dropped).
#pragma once

#include <string>
#include <vector>

namespace pagoda::jinja {

enum class TokenType { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  TokenType type;
  std::string text;  // text data, name, unescaped string value, number spelling, or operator
  int line;
};

// Throws pagoda::Error "<source>:<line>: <problem>" for an unterminated tag, string or comment.
std::vector<Token> lex(const std::string& template_text, const std::string& source);

}  // namespace pagoda::jinja
