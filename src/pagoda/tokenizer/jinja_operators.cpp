// jinja operators: Python arithmetic, membership, attribute/item lookup and slicing on jinja::Value.
#include <algorithm>
#include <cmath>
#include <optional>

#include "pagoda/tokenizer/jinja_builtins.h"

namespace pagoda::jinja {
namespace {

[[noreturn]] void undefined_error(const Value& v) {
  throw EvalError("'" + (v.undefined_name().empty() ? std::string("value") : v.undefined_name()) + "' is undefined");
}

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  throw EvalError("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

constexpr size_t kMaxRepeatBytes = size_t{64} << 20;  // "x" * n must not exhaust memory

Value repeat(const Value& seq, int64_t n) {
  size_t unit = seq.is_string() ? seq.as_string().size() : seq.as_list().size() * sizeof(Value);
  if (n > 0 && unit > 0 && static_cast<size_t>(n) > kMaxRepeatBytes / unit) throw EvalError("repetition result too large");
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.as_string();
    return Value(std::move(out));
  }
  ValueList out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return Value(std::move(out));
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  bool ints = a.is_int() && b.is_int();
  bool nums = a.is_number() && b.is_number();
  // Integer results that overflow int64 fall through to float arithmetic (Python has big ints).
  if (op == "+") {
    if (int64_t r; ints && !__builtin_add_overflow(a.as_int(), b.as_int(), &r)) return Value(r);
    if (nums) return Value(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list()) {
      ValueList out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value(std::move(out));
    }
  } else if (op == "-") {
    if (int64_t r; ints && !__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) return Value(r);
    if (nums) return Value(a.as_double() - b.as_double());
  } else if (op == "*") {
    if (int64_t r; ints && !__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) return Value(r);
    if (nums) return Value(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_list()) && b.is_int()) return repeat(a, b.as_int());
    if (a.is_int() && (b.is_string() || b.is_list())) return repeat(b, a.as_int());
  } else if (op == "/") {
    if (nums) {
      if (b.as_double() == 0.0) throw EvalError("division by zero");
      return Value(a.as_double() / b.as_double());
    }
  } else if (op == "//" || op == "%") {
    if (nums && b.as_double() == 0.0) throw EvalError(op == "//" ? "integer division or modulo by zero" : "modulo by zero");
    if (ints && !(a.as_int() == INT64_MIN && b.as_int() == -1)) {
      int64_t q = floor_div(a.as_int(), b.as_int());
      return op == "//" ? Value(q) : Value(a.as_int() - q * b.as_int());
    }
    if (nums) {
      double x = a.as_double(), y = b.as_double();
      double q = std::floor(x / y);
      return op == "//" ? Value(q) : Value(x - q * y);
    }
  } else if (op == "**") {
    if (ints && b.as_int() >= 0) {
      // Square-and-multiply; on int64 overflow fall back to float (Python would use a big int).
      int64_t result = 1, base = a.as_int();
      bool overflow = false;
      for (int64_t e = b.as_int(); e > 0 && !overflow; e >>= 1) {
        if (e & 1) overflow = __builtin_mul_overflow(result, base, &result);
        if (e > 1 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
      }
      if (!overflow) return Value(result);
    }
    if (nums) return Value(std::pow(a.as_double(), b.as_double()));
  }
  unsupported(op, a, b);
}

Value unary_op(const std::string& op, const Value& a) {
  if (a.is_int() && a.as_int() != INT64_MIN) return op == "-" ? Value(-a.as_int()) : Value(a.as_int());
  if (a.is_number()) return op == "-" ? Value(-a.as_double()) : a;
  if (a.is_undefined()) undefined_error(a);
  throw EvalError("bad operand type for unary " + op + ": '" + a.type_name() + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string()) throw EvalError("'in <string>' requires string as left operand, not " + item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const auto& v : container.as_list()) {
        if (values_equal(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    case Value::Kind::kUndefined:
      return false;
    default:
      throw EvalError("argument of type '" + container.type_name() + "' is not iterable");
  }
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_dict()) {
    const Value* v = obj.as_dict().find(name);
    if (v) return *v;
  } else if (obj.is_namespace()) {
    const Value* v = obj.as_namespace().attrs.find(name);
    if (v) return *v;
  }
  return Value(Undefined{name});
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  if (key.is_int() && (obj.is_list() || obj.is_string())) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      int64_t n = static_cast<int64_t>(obj.as_list().size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return obj.as_list()[static_cast<size_t>(i)];
    } else {
      auto chars = split_chars(obj.as_string());
      int64_t n = static_cast<int64_t>(chars.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return Value(chars[static_cast<size_t>(i)]);
    }
    return Value(Undefined{key.str()});
  }
  if (key.is_string()) return get_attr(obj, key.as_string());  // dict key, namespace attribute
  return Value(Undefined{key.str()});
}

namespace {

template <typename T>
std::vector<T> slice_items(const std::vector<T>& items, const Value* start, const Value* stop, const Value* step) {
  auto bound = [](const Value* v) -> std::optional<int64_t> {
    if (!v || v->is_none() || v->is_undefined()) return std::nullopt;
    if (!v->is_int()) throw EvalError("slice indices must be integers or None");
    return v->as_int();
  };
  int64_t n = static_cast<int64_t>(items.size());
  int64_t st = bound(step).value_or(1);
  if (st == 0) throw EvalError("slice step cannot be zero");
  // Python's index adjustment: negatives count from the end, then clamp to the valid range for the step.
  auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t i = *v;
    if (i < 0) i += n;
    if (st > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  int64_t lo = adjust(bound(start), st > 0 ? 0 : n - 1);
  int64_t hi = adjust(bound(stop), st > 0 ? n : -1);
  std::vector<T> out;
  for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) out.push_back(items[static_cast<size_t>(i)]);
  return out;
}

}  // namespace

Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step) {
  if (obj.is_list()) return Value(slice_items(obj.as_list(), start, stop, step));
  if (obj.is_string()) {
    std::string out;
    for (const auto& c : slice_items(split_chars(obj.as_string()), start, stop, step)) out += c;
    return Value(std::move(out));
  }
  if (obj.is_undefined()) undefined_error(obj);
  throw EvalError("'" + obj.type_name() + "' object is not subscriptable");
}

Value arg(const ValueList& args, const KwArgs& kwargs, size_t i, const char* key, const Value& fallback) {
  if (i < args.size()) return args[i];
  for (const auto& [k, v] : kwargs) {
    if (k == key) return v;
  }
  return fallback;
}

}  // namespace pagoda::jinja
