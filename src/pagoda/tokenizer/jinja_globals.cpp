// jinja globals: range, namespace, dict, raise_exception and strftime_now.
#include "pagoda/tokenizer/jinja_globals.h"

#include <ctime>

#include "pagoda/core/error.h"

namespace pagoda::jinja {
namespace {

constexpr int64_t kMaxRange = 1'000'000;  // a template cannot make the server allocate without bound

Value range(const ValueList& args, const KwArgs&) {
  if (args.empty() || args.size() > 3) throw EvalError("range expected 1 to 3 arguments");
  for (const auto& a : args) {
    if (!a.is_int()) throw EvalError("range() arguments must be integers, not " + a.type_name());
  }
  int64_t start = args.size() == 1 ? 0 : args[0].as_int();
  int64_t stop = args.size() == 1 ? args[0].as_int() : args[1].as_int();
  int64_t step = args.size() == 3 ? args[2].as_int() : 1;
  if (step == 0) throw EvalError("range() arg 3 must not be zero");
  ValueList out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(out.size()) >= kMaxRange) throw EvalError("range too big");
    out.emplace_back(i);
  }
  return Value(std::move(out));
}

// namespace(mapping?, **kwargs) and dict(mapping?, **kwargs) share their argument handling.
ValueDict attrs_from(const ValueList& args, const KwArgs& kwargs, const char* what) {
  ValueDict attrs;
  if (args.size() > 1) throw EvalError(std::string(what) + " expected at most 1 positional argument");
  if (!args.empty()) {
    if (!args[0].is_dict()) throw EvalError(std::string(what) + "() positional argument must be a mapping");
    attrs = args[0].as_dict();
  }
  for (const auto& [k, v] : kwargs) attrs.set(k, v);
  return attrs;
}

Value strftime_now(const ValueList& args, const KwArgs&) {
  if (args.size() != 1 || !args[0].is_string()) throw EvalError("strftime_now expects one format string");
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[256];
  size_t n = std::strftime(buf, sizeof(buf), args[0].as_string().c_str(), &local);
  return Value(std::string(buf, n));
}

}  // namespace

void add_builtin_globals(std::unordered_map<std::string, Value>& vars) {
  vars["range"] = Value::callable("range", range);
  vars["namespace"] = Value::callable("namespace", [](const ValueList& args, const KwArgs& kwargs) {
    auto ns = std::make_shared<Namespace>();
    ns->attrs = attrs_from(args, kwargs, "namespace");
    return Value(std::move(ns));
  });
  vars["dict"] = Value::callable("dict", [](const ValueList& args, const KwArgs& kwargs) {
    return Value(attrs_from(args, kwargs, "dict"));
  });
  // A template rejecting its input (e.g. roles that do not alternate) is a bad request, not a crash; the
  // message is the template's own, unprefixed, so that clients see what the model's authors wrote.
  vars["raise_exception"] = Value::callable("raise_exception", [](const ValueList& args, const KwArgs&) -> Value {
    throw InvalidRequest(args.empty() ? std::string("template raised an exception") : args[0].str());
  });
  vars["strftime_now"] = Value::callable("strftime_now", strftime_now);
}

}  // namespace pagoda::jinja
