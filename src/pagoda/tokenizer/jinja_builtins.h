// jinja built-ins: the operators (jinja_operators.cpp), filters and tests (jinja_filters.cpp) and
// Python str/dict/list methods (jinja_methods.cpp) that expressions evaluate through. All throw EvalError.
#pragma once

#include <optional>
#include <string>

#include "pagoda/tokenizer/jinja_value.h"

namespace pagoda::jinja {

// Arithmetic with Python semantics: + - * / // % ** (str/list concatenation and repetition included).
Value binary_op(const std::string& op, const Value& a, const Value& b);
Value unary_op(const std::string& op, const Value& a);
// `a in b`: substring, list membership or dict key.
bool contains(const Value& container, const Value& item);

// obj.name as jinja2 resolves it for data: dict key (methods are handled by call_method); Undefined when
// missing. Throws for attribute access on an undefined value, as jinja2's default Undefined does.
Value get_attr(const Value& obj, const std::string& name);
// obj[key]: list/string index (negative counts from the end), dict key; Undefined when missing.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] on lists and strings; null bounds are omitted ones.
Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step);

// Calls obj.name(args) when obj has such a Python method (str.strip, dict.items, ...); nullopt otherwise.
std::optional<Value> call_method(const Value& obj, const std::string& name, const ValueList& args,
                                 const KwArgs& kwargs);

bool has_filter(const std::string& name);
bool has_test(const std::string& name);
Value apply_filter(const std::string& name, const Value& input, const ValueList& args, const KwArgs& kwargs);
bool apply_test(const std::string& name, const Value& input, const ValueList& args);

// Python str helpers shared by filters and methods (ASCII case mapping; other characters unchanged).
// `chars` is None/Undefined for whitespace.
std::string py_strip(const std::string& s, const Value& chars, bool left, bool right);
std::string py_upper(std::string s);
std::string py_lower(std::string s);
std::string py_capitalize(const std::string& s);
std::string py_replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count);

// Argument access for built-ins: positional index i, else keyword `key`, else `fallback`.
// Returned by value: callers pass temporaries as `fallback`, which a returned reference would outlive.
Value arg(const ValueList& args, const KwArgs& kwargs, size_t i, const char* key, const Value& fallback);

}  // namespace pagoda::jinja
