// jinja AST: expression and statement nodes produced by the parser and walked by the evaluator. Nodes
// are generic (a kind, children, names) rather than one struct per construct, to keep the walk simple.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pagoda/tokenizer/jinja_value.h"

namespace pagoda::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // value
    kName,       // name
    kList,       // args = items
    kTuple,      // args = items (a list at run time; Python tuples only differ in repr)
    kDict,       // args = key0, value0, key1, value1, ...
    kAttr,       // args[0].name
    kSubscript,  // args[0][args[1]]
    kSlice,      // args[0][args[1]:args[2]:args[3]], any bound may be null
    kCall,       // args[0](args[1..], kwargs)
    kFilter,     // args[0] | name(args[1..], kwargs)
    kTest,       // args[0] is [not] name(args[1..])
    kUnary,      // name args[0], name in {"-", "+"}
    kBinary,     // args[0] name args[1], name in {"+", "-", "*", "/", "//", "%", "**"}
    kCompare,    // args[0] ops[0] args[1] ops[1] args[2] ... (chained as in Python)
    kAnd,
    kOr,
    kNot,
    kCond,    // args[1] if args[0] else args[2] (args[2] may be null: undefined)
    kConcat,  // args joined with "~"
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;
  bool negated = false;  // kTest: "is not"
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,       // text
    kOutput,     // {{ expr }}
    kIf,         // branches (condition, body); else_body
    kFor,        // for targets in expr [if cond]: body; else_body
    kSet,        // set targets = expr  |  set targets[0].attr = expr (when attr non-empty)
    kSetBlock,   // set targets[0] [| filter] %}body{% endset
    kMacro,      // macro name(params = defaults) body
    kBreak,
    kContinue,
    kScope,      // body rendered as is ({% generation %}, {% raw %} contents)
    kFilterBlock,  // {% filter f %}body{% endfilter %}: filter_expr applied to the body's output
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  ExprPtr filter_expr;  // kFilter node whose args[0] is null: the input is the rendered body
  std::vector<std::string> targets;
  std::string attr;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // aligned with params; null where none
};

}  // namespace pagoda::jinja
