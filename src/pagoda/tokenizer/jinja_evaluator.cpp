// jinja evaluator: walks statements and expressions, managing scopes, loops, macros and error lines.
#include "pagoda/tokenizer/jinja_evaluator.h"

#include <unordered_map>

#include "pagoda/core/error.h"
#include "pagoda/tokenizer/jinja_builtins.h"
#include "pagoda/tokenizer/jinja_globals.h"

namespace pagoda::jinja {
namespace {

constexpr int kMaxCallDepth = 256;  // recursive macros fail cleanly instead of overflowing the stack

struct Scope {
  Scope* parent = nullptr;
  std::unordered_map<std::string, Value> vars;

  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};

enum class Flow { kNormal, kBreak, kContinue };

class Evaluator {
 public:
  Evaluator(const ValueDict& globals, const std::string& source) : source_(source) {
    add_builtin_globals(root_.vars);
    for (const auto& [k, v] : globals.items) root_.vars[k] = v;
  }

  std::string run(const Body& body) {
    std::string out;
    exec(body, root_, out);
    return out;
  }

 private:
  Flow exec(const Body& body, Scope& scope, std::string& out) {
    for (const auto& stmt : body) {
      Flow flow;
      try {
        flow = exec_stmt(*stmt, scope, out);
      } catch (const EvalError& e) {
        throw InvalidRequest(source_ + ":" + std::to_string(stmt->line) + ": " + e.what());
      }
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow exec_stmt(const Stmt& s, Scope& scope, std::string& out) {
    switch (s.kind) {
      case Stmt::Kind::kText: out += s.text; break;
      case Stmt::Kind::kOutput: out += eval(*s.expr, scope).str(); break;
      case Stmt::Kind::kIf:
        for (const auto& [cond, body] : s.branches) {
          if (eval(*cond, scope).truthy()) return exec(body, scope, out);
        }
        return exec(s.else_body, scope, out);
      case Stmt::Kind::kFor: exec_for(s, scope, out); break;
      case Stmt::Kind::kSet: {
        Value v = eval(*s.expr, scope);
        if (!s.attr.empty()) {
          const Value* target = scope.find(s.targets[0]);
          if (!target || !target->is_namespace()) throw EvalError("cannot assign attribute on non-namespace object");
          target->as_namespace().attrs.set(s.attr, std::move(v));
        } else {
          assign(s.targets, v, scope);
        }
        break;
      }
      case Stmt::Kind::kSetBlock: {
        std::string text;
        exec(s.body, scope, text);
        Value v(std::move(text));
        if (s.filter_expr) v = eval_filter(*s.filter_expr, scope, &v);
        scope.vars[s.targets[0]] = std::move(v);
        break;
      }
      case Stmt::Kind::kMacro: scope.vars[s.name] = make_macro(s); break;
      case Stmt::Kind::kBreak: return Flow::kBreak;
      case Stmt::Kind::kContinue: return Flow::kContinue;
      case Stmt::Kind::kScope: return exec(s.body, scope, out);
      case Stmt::Kind::kFilterBlock: {
        std::string text;
        exec(s.body, scope, text);
        Value v(std::move(text));
        out += eval_filter(*s.filter_expr, scope, &v).str();
        break;
      }
    }
    return Flow::kNormal;
  }

  static void assign(const std::vector<std::string>& targets, const Value& v, Scope& scope) {
    if (targets.size() == 1) {
      scope.vars[targets[0]] = v;
      return;
    }
    ValueList items = v.iterate();
    if (items.size() != targets.size()) {
      throw EvalError("cannot unpack " + std::to_string(items.size()) + " values into " +
                      std::to_string(targets.size()) + " names");
    }
    for (size_t i = 0; i < targets.size(); ++i) scope.vars[targets[i]] = items[i];
  }

  void exec_for(const Stmt& s, Scope& scope, std::string& out) {
    ValueList items = eval(*s.expr, scope).iterate();
    if (s.cond) {  // the "if" clause filters before loop.length/index are computed, as in jinja2
      ValueList kept;
      for (const auto& item : items) {
        Scope probe{&scope, {}};
        assign(s.targets, item, probe);
        if (eval(*s.cond, probe).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      exec(s.else_body, scope, out);
      return;
    }
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      // A fresh scope per iteration: a {% set %} in the body neither leaks out nor into the next iteration.
      Scope iteration{&scope, {}};
      assign(s.targets, items[static_cast<size_t>(i)], iteration);
      ValueDict loop;
      loop.set("index0", Value(i));
      loop.set("index", Value(i + 1));
      loop.set("revindex0", Value(n - i - 1));
      loop.set("revindex", Value(n - i));
      loop.set("first", Value(i == 0));
      loop.set("last", Value(i == n - 1));
      loop.set("length", Value(n));
      loop.set("depth", Value(1));
      loop.set("depth0", Value(0));
      loop.set("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value(Undefined{"previtem"}));
      loop.set("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value(Undefined{"nextitem"}));
      loop.set("cycle", Value::callable("cycle", [i](const ValueList& args, const KwArgs&) {
                 if (args.empty()) throw EvalError("no items for cycling given");
                 return args[static_cast<size_t>(i) % args.size()];
               }));
      iteration.vars["loop"] = Value(std::move(loop));
      if (exec(s.body, iteration, out) == Flow::kBreak) break;
    }
  }

  Value make_macro(const Stmt& s) {
    const Stmt* def = &s;
    return Value::callable(s.name, [this, def](const ValueList& args, const KwArgs& kwargs) {
      if (args.size() > def->params.size()) {
        throw EvalError("macro '" + def->name + "' takes not more than " + std::to_string(def->params.size()) +
                        " argument(s)");
      }
      if (++call_depth_ > kMaxCallDepth) {
        call_depth_ = 0;
        throw EvalError("maximum macro recursion depth exceeded");
      }
      Scope frame{&root_, {}};
      for (size_t i = 0; i < def->params.size(); ++i) {
        const std::string& p = def->params[i];
        Value v = Value(Undefined{p});
        bool given = false;
        if (i < args.size()) {
          v = args[i];
          given = true;
        }
        for (const auto& [k, kv] : kwargs) {
          if (k == p) {
            v = kv;
            given = true;
          }
        }
        if (!given && def->defaults[i]) v = eval(*def->defaults[i], frame);
        frame.vars[p] = std::move(v);
      }
      std::string out;
      exec(def->body, frame, out);
      --call_depth_;
      return Value(std::move(out));
    });
  }

  ValueList eval_args(const Expr& e, Scope& scope, KwArgs& kwargs) {
    ValueList args;
    for (size_t i = 1; i < e.args.size(); ++i) args.push_back(eval(*e.args[i], scope));
    for (const auto& [k, v] : e.kwargs) kwargs.emplace_back(k, eval(*v, scope));
    return args;
  }

  // A filter (chain); `block_input` feeds the innermost filter of a {% filter %} / {% set x | f %} block.
  Value eval_filter(const Expr& e, Scope& scope, const Value* block_input) {
    Value input;
    if (!e.args[0]) input = *block_input;
    else if (e.args[0]->kind == Expr::Kind::kFilter) input = eval_filter(*e.args[0], scope, block_input);
    else input = eval(*e.args[0], scope);
    KwArgs kwargs;
    ValueList args = eval_args(e, scope, kwargs);
    return apply_filter(e.name, input, args, kwargs);
  }

  Value eval_call(const Expr& e, Scope& scope) {
    const Expr& callee = *e.args[0];
    KwArgs kwargs;
    Value fn;
    if (callee.kind == Expr::Kind::kAttr) {
      Value obj = eval(*callee.args[0], scope);
      ValueList args = eval_args(e, scope, kwargs);
      if (auto result = call_method(obj, callee.name, args, kwargs)) return *result;
      fn = get_attr(obj, callee.name);
      if (!fn.is_callable()) throw EvalError("'" + obj.type_name() + "' object has no method '" + callee.name + "'");
      return fn.as_callable().fn(args, kwargs);
    }
    fn = eval(callee, scope);
    if (fn.is_undefined()) throw EvalError("'" + fn.undefined_name() + "' is undefined");
    if (!fn.is_callable()) throw EvalError("'" + fn.type_name() + "' object is not callable");
    ValueList args = eval_args(e, scope, kwargs);
    return fn.as_callable().fn(args, kwargs);
  }

  static bool compare(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return values_equal(a, b);
    if (op == "!=") return !values_equal(a, b);
    if (op == "in") return contains(b, a);
    if (op == "not in") return !contains(b, a);
    int c = compare_values(a, b);
    if (op == "<") return c < 0;
    if (op == "<=") return c <= 0;
    if (op == ">") return c > 0;
    return c >= 0;
  }

  Value eval(const Expr& e, Scope& scope) {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.value;
      case Expr::Kind::kName: {
        const Value* v = scope.find(e.name);
        return v ? *v : Value(Undefined{e.name});
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        ValueList items;
        for (const auto& item : e.args) items.push_back(eval(*item, scope));
        return Value(std::move(items));
      }
      case Expr::Kind::kDict: {
        ValueDict dict;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          dict.set(eval(*e.args[i], scope).str(), eval(*e.args[i + 1], scope));
        }
        return Value(std::move(dict));
      }
      case Expr::Kind::kAttr: return get_attr(eval(*e.args[0], scope), e.name);
      case Expr::Kind::kSubscript: return get_item(eval(*e.args[0], scope), eval(*e.args[1], scope));
      case Expr::Kind::kSlice: {
        Value obj = eval(*e.args[0], scope);
        Value bounds[3];
        for (int i = 0; i < 3; ++i) {
          if (e.args[static_cast<size_t>(i + 1)]) bounds[i] = eval(*e.args[static_cast<size_t>(i + 1)], scope);
        }
        return slice(obj, &bounds[0], &bounds[1], &bounds[2]);
      }
      case Expr::Kind::kCall: return eval_call(e, scope);
      case Expr::Kind::kFilter: return eval_filter(e, scope, nullptr);
      case Expr::Kind::kTest: {
        Value subject = eval(*e.args[0], scope);
        KwArgs kwargs;
        ValueList args = eval_args(e, scope, kwargs);
        return Value(apply_test(e.name, subject, args) != e.negated);
      }
      case Expr::Kind::kUnary: return unary_op(e.name, eval(*e.args[0], scope));
      case Expr::Kind::kBinary: return binary_op(e.name, eval(*e.args[0], scope), eval(*e.args[1], scope));
      case Expr::Kind::kCompare: {
        Value left = eval(*e.args[0], scope);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.args[i + 1], scope);
          if (!compare(e.ops[i], left, right)) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case Expr::Kind::kAnd: {
        Value left = eval(*e.args[0], scope);
        return left.truthy() ? eval(*e.args[1], scope) : left;
      }
      case Expr::Kind::kOr: {
        Value left = eval(*e.args[0], scope);
        return left.truthy() ? left : eval(*e.args[1], scope);
      }
      case Expr::Kind::kNot: return Value(!eval(*e.args[0], scope).truthy());
      case Expr::Kind::kCond:
        if (eval(*e.args[0], scope).truthy()) return eval(*e.args[1], scope);
        return e.args[2] ? eval(*e.args[2], scope) : Value();
      case Expr::Kind::kConcat: {
        std::string out;
        for (const auto& part : e.args) out += eval(*part, scope).str();
        return Value(std::move(out));
      }
    }
    return Value();
  }

  const std::string& source_;
  Scope root_;
  int call_depth_ = 0;
};

}  // namespace

std::string render(const Body& body, const ValueDict& globals, const std::string& source) {
  return Evaluator(globals, source).run(body);
}

}  // namespace pagoda::jinja
