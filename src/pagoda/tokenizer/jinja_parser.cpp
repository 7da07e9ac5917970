// jinja statement parser: text, {{ }} output and the {% %} statements chat templates use (if, for, set,
// macro, filter, raw, break/continue, and transformers' {% generation %} marker).
#include "pagoda/tokenizer/jinja_parser.h"

#include "pagoda/tokenizer/jinja_expr_parser.h"

namespace pagoda::jinja {
namespace {

class Parser {
 public:
  Parser(const std::string& text, const std::string& source) : ts_(lex(text, source), source), exprs_(ts_) {}

  Body parse() {
    std::string end;
    Body body = parse_body({}, "", &end);
    return body;
  }

 private:
  StmtPtr make(Stmt::Kind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  static std::string list_tags(const std::vector<std::string>& ends) {
    std::string out;
    for (size_t i = 0; i < ends.size(); ++i) out += (i == 0 ? "'" : (i + 1 == ends.size() ? " or '" : ", '")) + ends[i] + "'";
    return out;
  }

  // Parses statements until one of `ends` opens a block tag; leaves the cursor after that tag's name and
  // stores the name in `found`. `owner` names the block being closed, for error messages.
  Body parse_body(const std::vector<std::string>& ends, const std::string& owner, std::string* found) {
    Body body;
    while (true) {
      const Token& t = ts_.current();
      switch (t.type) {
        case TokenType::kText: {
          auto s = make(Stmt::Kind::kText, t.line);
          s->text = ts_.next().text;
          body.push_back(std::move(s));
          break;
        }
        case TokenType::kVarBegin: {
          auto s = make(Stmt::Kind::kOutput, ts_.next().line);
          s->expr = exprs_.parse_tuple();
          ts_.expect(TokenType::kVarEnd, "end of print statement");
          body.push_back(std::move(s));
          break;
        }
        case TokenType::kBlockBegin: {
          int line = ts_.next().line;
          if (ts_.current().type != TokenType::kName) ts_.fail("tag name expected");
          std::string name = ts_.current().text;
          for (const auto& end : ends) {
            if (name == end) {
              ts_.next();
              *found = name;
              return body;
            }
          }
          body.push_back(parse_statement(line, ends, owner));
          break;
        }
        case TokenType::kEof:
          if (!ends.empty()) {
            ts_.fail("Unexpected end of template. Jinja was looking for the following tags: " + list_tags(ends) +
                     ". The innermost block that needs to be closed is '" + owner + "'.");
          }
          return body;
        default:
          ts_.fail("unexpected " + TokenStream::describe(t));
      }
    }
  }

  StmtPtr parse_statement(int line, const std::vector<std::string>& ends, const std::string& owner) {
    std::string name = ts_.next().text;
    StmtPtr s;
    if (name == "if") {
      s = parse_if(line);
    } else if (name == "for") {
      s = parse_for(line);
    } else if (name == "set") {
      s = parse_set(line);
    } else if (name == "macro") {
      s = parse_macro(line);
    } else if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) ts_.fail_at(line, "'" + name + "' outside of a loop");
      s = make(name == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, line);
      ts_.expect(TokenType::kBlockEnd, "end of statement block");
    } else if (name == "raw" || name == "generation") {
      s = make(Stmt::Kind::kScope, line);
      ts_.expect(TokenType::kBlockEnd, "end of statement block");
      std::string end;
      s->body = parse_body({"end" + name}, name, &end);
      ts_.expect(TokenType::kBlockEnd, "end of statement block");
    } else if (name == "filter") {
      s = make(Stmt::Kind::kFilterBlock, line);
      s->filter_expr = exprs_.parse_filter(nullptr);
      while (ts_.skip_op("|")) s->filter_expr = exprs_.parse_filter(std::move(s->filter_expr));
      ts_.expect(TokenType::kBlockEnd, "end of statement block");
      std::string end;
      s->body = parse_body({"endfilter"}, "filter", &end);
      ts_.expect(TokenType::kBlockEnd, "end of statement block");
    } else {
      std::string msg = "Encountered unknown tag '" + name + "'.";
      if (!ends.empty()) {
        msg += " Jinja was looking for the following tags: " + list_tags(ends) +
               ". The innermost block that needs to be closed is '" + owner + "'.";
      }
      ts_.fail_at(line, msg);
    }
    return s;
  }

  StmtPtr parse_if(int line) {
    auto s = make(Stmt::Kind::kIf, line);
    std::string end = "elif";
    while (end == "elif") {
      ExprPtr cond = exprs_.parse_tuple();
      ts_.expect(TokenType::kBlockEnd, "end of statement block");
      Body body = parse_body({"elif", "else", "endif"}, "if", &end);
      s->branches.emplace_back(std::move(cond), std::move(body));
    }
    if (end == "else") {
      ts_.expect(TokenType::kBlockEnd, "end of statement block");
      s->else_body = parse_body({"endif"}, "if", &end);
    }
    ts_.expect(TokenType::kBlockEnd, "end of statement block");
    return s;
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> targets;
    bool paren = ts_.skip_op("(");
    do {
      targets.push_back(ts_.expect_name());
    } while (ts_.skip_op(","));
    if (paren) ts_.expect_op(")");
    return targets;
  }

  StmtPtr parse_for(int line) {
    auto s = make(Stmt::Kind::kFor, line);
    s->targets = parse_targets();
    if (!ts_.skip_name("in")) ts_.fail("expected 'in', got " + TokenStream::describe(ts_.current()));
    s->expr = exprs_.parse_tuple(/*with_condexpr=*/false);
    if (ts_.skip_name("if")) s->cond = exprs_.parse_expression();
    if (ts_.skip_name("recursive")) ts_.fail_at(line, "recursive loops are not supported");
    ts_.expect(TokenType::kBlockEnd, "end of statement block");
    std::string end;
    ++loop_depth_;
    s->body = parse_body({"else", "endfor"}, "for", &end);
    --loop_depth_;
    if (end == "else") {
      ts_.expect(TokenType::kBlockEnd, "end of statement block");
      s->else_body = parse_body({"endfor"}, "for", &end);
    }
    ts_.expect(TokenType::kBlockEnd, "end of statement block");
    return s;
  }

  StmtPtr parse_set(int line) {
    std::vector<std::string> targets;
    std::string attr;
    if (ts_.current().type == TokenType::kName && ts_.peek().type == TokenType::kOp && ts_.peek().text == ".") {
      targets.push_back(ts_.next().text);
      ts_.next();
      attr = ts_.expect_name();
    } else {
      targets = parse_targets();
    }
    if (ts_.skip_op("=")) {
      auto s = make(Stmt::Kind::kSet, line);
      s->targets = std::move(targets);
      s->attr = std::move(attr);
      s->expr = exprs_.parse_tuple();
      ts_.expect(TokenType::kBlockEnd, "end of statement block");
      return s;
    }
    // Block assignment: {% set x %}...{% endset %}, optionally filtered.
    if (!attr.empty() || targets.size() != 1) ts_.fail("expected token '=', got " + TokenStream::describe(ts_.current()));
    auto s = make(Stmt::Kind::kSetBlock, line);
    s->targets = std::move(targets);
    if (ts_.skip_op("|")) {
      s->filter_expr = exprs_.parse_filter(nullptr);
      while (ts_.skip_op("|")) s->filter_expr = exprs_.parse_filter(std::move(s->filter_expr));
    }
    ts_.expect(TokenType::kBlockEnd, "end of statement block");
    std::string end;
    s->body = parse_body({"endset"}, "set", &end);
    ts_.expect(TokenType::kBlockEnd, "end of statement block");
    return s;
  }

  StmtPtr parse_macro(int line) {
    auto s = make(Stmt::Kind::kMacro, line);
    s->name = ts_.expect_name();
    ts_.expect_op("(");
    while (!ts_.is_op(")")) {
      s->params.push_back(ts_.expect_name());
      s->defaults.push_back(ts_.skip_op("=") ? exprs_.parse_expression() : nullptr);
      if (!ts_.skip_op(",")) break;
    }
    ts_.expect_op(")");
    ts_.expect(TokenType::kBlockEnd, "end of statement block");
    std::string end;
    int saved_depth = loop_depth_;
    loop_depth_ = 0;  // a macro body is not inside the caller's loop
    s->body = parse_body({"endmacro"}, "macro", &end);
    loop_depth_ = saved_depth;
    ts_.expect(TokenType::kBlockEnd, "end of statement block");
    return s;
  }

  TokenStream ts_;
  ExprParser exprs_;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(const std::string& template_text, const std::string& source) {
  return Parser(template_text, source).parse();
}

}  // namespace pagoda::jinja
