// jinja::Value: the dynamically typed value of the chat-template interpreter, with Python semantics for
// truthiness, str()/repr(), equality, ordering and json.dumps (what templates observe through jinja2).
// Lists, dicts and namespaces are shared by reference, as Python objects are.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace pagoda::jinja {

// A template error found while rendering (wrong types, undefined attribute access, ...); the evaluator
// adds the source and line and rethrows it as pagoda::InvalidRequest.
class EvalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Value;
using ValueList = std::vector<Value>;
using KwArgs = std::vector<std::pair<std::string, Value>>;

// Insertion-ordered string-keyed map, like a Python dict (templates render and serialise in order).
struct ValueDict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value value);
};

struct Undefined {
  std::string name;  // for "'x' is undefined" messages
};

struct Callable {
  std::string name;
  std::function<Value(const ValueList& args, const KwArgs& kwargs)> fn;
};

// namespace(...) objects: the one mutable thing templates have ({% set ns.x = ... %}).
struct Namespace {
  ValueDict attrs;
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };

  Value() : v_(Undefined{}) {}
  Value(Undefined u) : v_(std::move(u)) {}
  Value(std::nullptr_t) : v_(nullptr) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(int64_t{i}) {}
  Value(int64_t i) : v_(i) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(ValueList l) : v_(std::make_shared<ValueList>(std::move(l))) {}
  Value(ValueDict d) : v_(std::make_shared<ValueDict>(std::move(d))) {}
  Value(std::shared_ptr<Namespace> ns) : v_(std::move(ns)) {}
  Value(std::shared_ptr<Callable> c) : v_(std::move(c)) {}

  // Objects keep their keys' order: an ordered_json (a request's messages) renders as it was sent, as a
  // Python dict would; a plain json has its keys sorted.
  static Value from_json(const nlohmann::json& j);
  static Value from_json(const nlohmann::ordered_json& j);
  static Value callable(std::string name, decltype(Callable::fn) fn);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt || kind() == Kind::kBool; }  // bool is an int in Python
  bool is_number() const { return is_int() || kind() == Kind::kFloat; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_namespace() const { return kind() == Kind::kNamespace; }
  bool is_callable() const { return kind() == Kind::kCallable; }

  int64_t as_int() const;  // bool or int
  double as_double() const;  // any number
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const ValueList& as_list() const { return *std::get<std::shared_ptr<ValueList>>(v_); }
  const ValueDict& as_dict() const { return *std::get<std::shared_ptr<ValueDict>>(v_); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(v_); }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<Callable>>(v_); }
  const std::string& undefined_name() const { return std::get<Undefined>(v_).name; }

  bool truthy() const;
  std::string str() const;   // Python str(); what {{ }} prints (Undefined prints as "")
  std::string repr() const;  // Python repr(); used for items inside containers
  std::string type_name() const;
  // json.dumps(value, ensure_ascii=False, indent=indent) as transformers' tojson filter does; indent < 0
  // means none (", " and ": " separators on one line).
  std::string to_json(int indent = -1) const;
  // The items iterating over this value yields (list items, dict keys, string characters).
  ValueList iterate() const;

 private:
  std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string, std::shared_ptr<ValueList>,
               std::shared_ptr<ValueDict>, std::shared_ptr<Namespace>, std::shared_ptr<Callable>>
      v_;
};

// Python ==, and <, > ... (throws EvalError for unorderable types).
bool values_equal(const Value& a, const Value& b);
int compare_values(const Value& a, const Value& b);

// Python's repr() of a float ("1.0", "0.1", "1e+20").
std::string format_float(double d);

// UTF-8 strings indexed by code point, as Python str is.
std::vector<std::string> split_chars(const std::string& s);

}  // namespace pagoda::jinja
