// jinja expression parser: the token cursor shared with the statement parser, and jinja2's expression
// grammar (ternary > or > and > not > compare > + - > ~ > * / // % > ** > unary > postfix/filters/tests).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "pagoda/tokenizer/jinja_ast.h"
#include "pagoda/tokenizer/jinja_lexer.h"

namespace pagoda::jinja {

class TokenStream {
 public:
  TokenStream(std::vector<Token> tokens, std::string source) : tokens_(std::move(tokens)), source_(std::move(source)) {}

  const Token& current() const { return tokens_[pos_]; }
  const Token& peek(size_t ahead = 1) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }
  bool is_op(const char* op) const { return current().type == TokenType::kOp && current().text == op; }
  bool is_name(const char* name) const { return current().type == TokenType::kName && current().text == name; }
  // Consumes the operator/keyword if it is next.
  bool skip_op(const char* op);
  bool skip_name(const char* name);
  void expect_op(const char* op);
  std::string expect_name();
  void expect(TokenType type, const char* what);
  [[noreturn]] void fail(const std::string& msg) const { fail_at(current().line, msg); }
  [[noreturn]] void fail_at(int line, const std::string& msg) const;
  static std::string describe(const Token& t);

 private:
  std::vector<Token> tokens_;
  std::string source_;
  size_t pos_ = 0;
};

class ExprParser {
 public:
  explicit ExprParser(TokenStream& ts) : ts_(ts) {}

  ExprPtr parse_expression(bool with_condexpr = true);
  // An expression or a bare comma-separated tuple ("{% set a = 1, 2 %}", "for x in a, b").
  ExprPtr parse_tuple(bool with_condexpr = true);
  // "| name(args)" applied to `input` (null for {% filter %} blocks).
  ExprPtr parse_filter(ExprPtr input);

 private:
  ExprPtr parse_keyword_chain(const char* keyword, Expr::Kind kind, ExprPtr (ExprParser::*operand)());
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_test(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  void parse_call_args(Expr& call);
  ExprPtr make(Expr::Kind kind, int line);

  TokenStream& ts_;
};

}  // namespace pagoda::jinja
