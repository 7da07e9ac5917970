// jinja expression parser: token cursor helpers and the recursive-descent expression grammar.
#include "pagoda/tokenizer/jinja_expr_parser.h"

#include <cstdlib>

#include "pagoda/core/error.h"
#include "pagoda/tokenizer/jinja_builtins.h"

namespace pagoda::jinja {

bool TokenStream::skip_op(const char* op) {
  if (!is_op(op)) return false;
  next();
  return true;
}

bool TokenStream::skip_name(const char* name) {
  if (!is_name(name)) return false;
  next();
  return true;
}

void TokenStream::expect_op(const char* op) {
  if (!skip_op(op)) fail(std::string("expected token '") + op + "', got " + describe(current()));
}

std::string TokenStream::expect_name() {
  if (current().type != TokenType::kName) fail("expected name, got " + describe(current()));
  return next().text;
}

void TokenStream::expect(TokenType type, const char* what) {
  if (current().type != type) fail(std::string("expected token '") + what + "', got " + describe(current()));
  next();
}

void TokenStream::fail_at(int line, const std::string& msg) const {
  throw Error(source_ + ":" + std::to_string(line) + ": " + msg);
}

std::string TokenStream::describe(const Token& t) {
  switch (t.type) {
    case TokenType::kText: return "template data";
    case TokenType::kVarBegin: return "'{{'";
    case TokenType::kVarEnd: return "end of print statement";
    case TokenType::kBlockBegin: return "'{%'";
    case TokenType::kBlockEnd: return "end of statement block";
    case TokenType::kEof: return "end of template";
    case TokenType::kString: return "string";
    default: return "'" + t.text + "'";
  }
}

ExprPtr ExprParser::make(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

ExprPtr ExprParser::parse_tuple(bool with_condexpr) {
  int line = ts_.current().line;
  ExprPtr first = parse_expression(with_condexpr);
  if (!ts_.is_op(",")) return first;
  auto tuple = make(Expr::Kind::kTuple, line);
  tuple->args.push_back(std::move(first));
  while (ts_.skip_op(",")) {
    if (ts_.current().type == TokenType::kBlockEnd || ts_.is_name("if")) break;  // trailing comma
    tuple->args.push_back(parse_expression(with_condexpr));
  }
  return tuple;
}

ExprPtr ExprParser::parse_expression(bool with_condexpr) {
  ExprPtr node = parse_or();
  if (!with_condexpr) return node;
  while (ts_.is_name("if")) {
    int line = ts_.next().line;
    auto cond = make(Expr::Kind::kCond, line);
    cond->args.push_back(parse_or());
    cond->args.push_back(std::move(node));
    cond->args.push_back(ts_.skip_name("else") ? parse_expression() : nullptr);
    node = std::move(cond);
  }
  return node;
}

// `operand (keyword operand)*`, left-associative: the shape of both `or` and `and`.
ExprPtr ExprParser::parse_keyword_chain(const char* keyword, Expr::Kind kind, ExprPtr (ExprParser::*operand)()) {
  ExprPtr left = (this->*operand)();
  while (ts_.is_name(keyword)) {
    auto node = make(kind, ts_.next().line);
    node->args.push_back(std::move(left));
    node->args.push_back((this->*operand)());
    left = std::move(node);
  }
  return left;
}

ExprPtr ExprParser::parse_or() { return parse_keyword_chain("or", Expr::Kind::kOr, &ExprParser::parse_and); }

ExprPtr ExprParser::parse_and() { return parse_keyword_chain("and", Expr::Kind::kAnd, &ExprParser::parse_not); }

ExprPtr ExprParser::parse_not() {
  if (ts_.is_name("not")) {
    auto node = make(Expr::Kind::kNot, ts_.next().line);
    node->args.push_back(parse_not());
    return node;
  }
  return parse_compare();
}

ExprPtr ExprParser::parse_compare() {
  int line = ts_.current().line;
  ExprPtr first = parse_math1();
  ExprPtr node;
  while (true) {
    std::string op;
    const Token& t = ts_.current();
    if (t.type == TokenType::kOp && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" ||
                                     t.text == "<=" || t.text == ">=")) {
      op = t.text;
      ts_.next();
    } else if (ts_.skip_name("in")) {
      op = "in";
    } else if (ts_.is_name("not") && ts_.peek().type == TokenType::kName && ts_.peek().text == "in") {
      ts_.next();
      ts_.next();
      op = "not in";
    } else {
      break;
    }
    if (!node) {
      node = make(Expr::Kind::kCompare, line);
      node->args.push_back(std::move(first));
    }
    node->ops.push_back(op);
    node->args.push_back(parse_math1());
  }
  return node ? std::move(node) : std::move(first);
}

namespace {
bool is_one_of(const Token& t, std::initializer_list<const char*> ops) {
  if (t.type != TokenType::kOp) return false;
  for (const char* op : ops) {
    if (t.text == op) return true;
  }
  return false;
}
}  // namespace

ExprPtr ExprParser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_one_of(ts_.current(), {"+", "-"})) {
    const Token& op = ts_.next();
    auto node = make(Expr::Kind::kBinary, op.line);
    node->name = op.text;
    node->args.push_back(std::move(left));
    node->args.push_back(parse_concat());
    left = std::move(node);
  }
  return left;
}

ExprPtr ExprParser::parse_concat() {
  int line = ts_.current().line;
  ExprPtr first = parse_math2();
  if (!ts_.is_op("~")) return first;
  auto node = make(Expr::Kind::kConcat, line);
  node->args.push_back(std::move(first));
  while (ts_.skip_op("~")) node->args.push_back(parse_math2());
  return node;
}

ExprPtr ExprParser::parse_math2() {
  ExprPtr left = parse_pow();
  while (is_one_of(ts_.current(), {"*", "/", "//", "%"})) {
    const Token& op = ts_.next();
    auto node = make(Expr::Kind::kBinary, op.line);
    node->name = op.text;
    node->args.push_back(std::move(left));
    node->args.push_back(parse_pow());
    left = std::move(node);
  }
  return left;
}

ExprPtr ExprParser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (ts_.is_op("**")) {
    auto node = make(Expr::Kind::kBinary, ts_.next().line);
    node->name = "**";
    node->args.push_back(std::move(left));
    node->args.push_back(parse_unary(true));
    left = std::move(node);
  }
  return left;
}

ExprPtr ExprParser::parse_unary(bool with_filter) {
  ExprPtr node;
  if (is_one_of(ts_.current(), {"-", "+"})) {
    const Token& op = ts_.next();
    node = make(Expr::Kind::kUnary, op.line);
    node->name = op.text;
    node->args.push_back(parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  return with_filter ? parse_filter_expr(std::move(node)) : std::move(node);
}

ExprPtr ExprParser::parse_primary() {
  const Token& t = ts_.current();
  int line = t.line;
  auto literal = [&](Value v) {
    auto node = make(Expr::Kind::kLiteral, line);
    node->value = std::move(v);
    return node;
  };
  switch (t.type) {
    case TokenType::kName: {
      std::string name = ts_.next().text;
      if (name == "true" || name == "True") return literal(Value(true));
      if (name == "false" || name == "False") return literal(Value(false));
      if (name == "none" || name == "None") return literal(Value(nullptr));
      auto node = make(Expr::Kind::kName, line);
      node->name = name;
      return node;
    }
    case TokenType::kString: {
      std::string s;
      while (ts_.current().type == TokenType::kString) s += ts_.next().text;  // adjacent literals join
      return literal(Value(std::move(s)));
    }
    case TokenType::kInt: {
      std::string text = ts_.next().text;
      try {
        return literal(Value(static_cast<int64_t>(std::stoll(text))));
      } catch (const std::out_of_range&) {
        ts_.fail_at(line, "integer literal out of range: " + text);
      }
    }
    case TokenType::kFloat:  // strtod, not stod: 1e999 is inf (as in Python), not a thrown out_of_range
      return literal(Value(std::strtod(ts_.next().text.c_str(), nullptr)));
    case TokenType::kOp:
      if (ts_.skip_op("(")) {
        if (ts_.skip_op(")")) return make(Expr::Kind::kTuple, line);
        ExprPtr inner = parse_tuple();
        ts_.expect_op(")");
        return inner;
      }
      if (ts_.skip_op("[")) {
        auto node = make(Expr::Kind::kList, line);
        while (!ts_.is_op("]")) {
          node->args.push_back(parse_expression());
          if (!ts_.skip_op(",")) break;
        }
        ts_.expect_op("]");
        return node;
      }
      if (ts_.skip_op("{")) {
        auto node = make(Expr::Kind::kDict, line);
        while (!ts_.is_op("}")) {
          node->args.push_back(parse_expression());
          ts_.expect_op(":");
          node->args.push_back(parse_expression());
          if (!ts_.skip_op(",")) break;
        }
        ts_.expect_op("}");
        return node;
      }
      [[fallthrough]];
    default:
      ts_.fail("unexpected " + TokenStream::describe(t));
  }
}

ExprPtr ExprParser::parse_postfix(ExprPtr node) {
  while (true) {
    if (ts_.is_op(".")) {
      int line = ts_.next().line;
      const Token& t = ts_.current();
      if (t.type == TokenType::kInt) {  // x.0 is x[0]
        auto sub = make(Expr::Kind::kSubscript, line);
        sub->args.push_back(std::move(node));
        sub->args.push_back(parse_primary());
        node = std::move(sub);
        continue;
      }
      auto attr = make(Expr::Kind::kAttr, line);
      attr->name = ts_.expect_name();
      attr->args.push_back(std::move(node));
      node = std::move(attr);
    } else if (ts_.is_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (ts_.is_op("(")) {
      auto call = make(Expr::Kind::kCall, ts_.current().line);
      call->args.push_back(std::move(node));
      parse_call_args(*call);
      node = std::move(call);
    } else {
      return node;
    }
  }
}

ExprPtr ExprParser::parse_subscript(ExprPtr node) {
  int line = ts_.next().line;  // "["
  ExprPtr start, stop, step;
  if (!ts_.is_op(":")) start = parse_expression();
  if (!ts_.skip_op(":")) {
    ts_.expect_op("]");
    auto sub = make(Expr::Kind::kSubscript, line);
    sub->args.push_back(std::move(node));
    sub->args.push_back(std::move(start));
    return sub;
  }
  if (!ts_.is_op(":") && !ts_.is_op("]")) stop = parse_expression();
  if (ts_.skip_op(":") && !ts_.is_op("]")) step = parse_expression();
  ts_.expect_op("]");
  auto slice = make(Expr::Kind::kSlice, line);
  slice->args.push_back(std::move(node));
  slice->args.push_back(std::move(start));
  slice->args.push_back(std::move(stop));
  slice->args.push_back(std::move(step));
  return slice;
}

void ExprParser::parse_call_args(Expr& call) {
  ts_.expect_op("(");
  while (!ts_.is_op(")")) {
    if (ts_.current().type == TokenType::kName && ts_.peek().type == TokenType::kOp && ts_.peek().text == "=") {
      std::string key = ts_.next().text;
      ts_.next();
      call.kwargs.emplace_back(key, parse_expression());
    } else {
      if (!call.kwargs.empty()) ts_.fail("positional argument follows keyword argument");
      call.args.push_back(parse_expression());
    }
    if (!ts_.skip_op(",")) break;
  }
  ts_.expect_op(")");
}

ExprPtr ExprParser::parse_filter(ExprPtr input) {
  int line = ts_.current().line;
  auto filter = make(Expr::Kind::kFilter, line);
  filter->name = ts_.expect_name();
  // jinja2 rejects unknown filters and tests when compiling; so do we, so a bad template fails at load.
  if (!has_filter(filter->name)) ts_.fail_at(line, "No filter named '" + filter->name + "'.");
  filter->args.push_back(std::move(input));
  if (ts_.is_op("(")) parse_call_args(*filter);
  return filter;
}

ExprPtr ExprParser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (ts_.skip_op("|")) {
      node = parse_filter(std::move(node));
    } else if (ts_.is_name("is")) {
      node = parse_test(std::move(node));
    } else if (ts_.is_op("(")) {
      auto call = make(Expr::Kind::kCall, ts_.current().line);
      call->args.push_back(std::move(node));
      parse_call_args(*call);
      node = std::move(call);
    } else {
      return node;
    }
  }
}

ExprPtr ExprParser::parse_test(ExprPtr node) {
  int line = ts_.next().line;  // "is"
  auto test = make(Expr::Kind::kTest, line);
  test->negated = ts_.skip_name("not");
  test->name = ts_.expect_name();
  if (!has_test(test->name)) ts_.fail_at(line, "No test named '" + test->name + "'.");
  test->args.push_back(std::move(node));
  const Token& t = ts_.current();
  if (ts_.is_op("(")) {
    parse_call_args(*test);
  } else if ((t.type == TokenType::kName || t.type == TokenType::kString || t.type == TokenType::kInt ||
              t.type == TokenType::kFloat || ts_.is_op("[") || ts_.is_op("{")) &&
             !(t.type == TokenType::kName && (t.text == "else" || t.text == "or" || t.text == "and"))) {
    if (ts_.is_name("is")) ts_.fail("You cannot chain multiple tests with is");
    test->args.push_back(parse_postfix(parse_primary()));  // "x is divisibleby 3", "x is sameas none"
  }
  return test;
}

}  // namespace pagoda::jinja
