// jinja filters and tests: jinja2's built-in filters chat templates use (trim, tojson as transformers
// overrides it, join, map/select/selectattr, ...) and its `is` tests (defined, none, string, ...).
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "pagoda/tokenizer/jinja_builtins.h"

namespace pagoda::jinja {
namespace {

using FilterFn = Value (*)(const Value& in, const ValueList& args, const KwArgs& kwargs);
using TestFn = bool (*)(const Value& in, const ValueList& args);

const Value kNone{nullptr};
const Value kUndef{};

// Filters that take a string coerce their input with str(), as jinja2's soft_str does.
std::string text_of(const Value& v) { return v.str(); }

Value attribute_of(const Value& item, const Value& attribute) {
  if (attribute.is_int()) return get_item(item, attribute);
  // "a.b" walks nested attributes, as jinja2's make_attrgetter does.
  Value cur = item;
  const std::string path = attribute.str();
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    cur = get_item(cur, Value(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start)));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

ValueList rest_args(const ValueList& args, size_t from) {
  return from < args.size() ? ValueList(args.begin() + static_cast<long>(from), args.end()) : ValueList{};
}

Value filter_join(const Value& in, const ValueList& args, const KwArgs& kwargs) {
  std::string sep = arg(args, kwargs, 0, "d", Value("")).str();
  const Value& attribute = arg(args, kwargs, 1, "attribute", kNone);
  std::string out;
  ValueList items = in.iterate();
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += (attribute.is_none() ? items[i] : attribute_of(items[i], attribute)).str();
  }
  return Value(std::move(out));
}

Value filter_default(const Value& in, const ValueList& args, const KwArgs& kwargs) {
  bool boolean = arg(args, kwargs, 1, "boolean", Value(false)).truthy();
  if (in.is_undefined() || (boolean && !in.truthy())) return arg(args, kwargs, 0, "default_value", Value(""));
  return in;
}

Value filter_length(const Value& in, const ValueList&, const KwArgs&) {
  switch (in.kind()) {
    case Value::Kind::kUndefined: return Value(0);
    case Value::Kind::kString: return Value(static_cast<int64_t>(split_chars(in.as_string()).size()));
    case Value::Kind::kList: return Value(static_cast<int64_t>(in.as_list().size()));
    case Value::Kind::kDict: return Value(static_cast<int64_t>(in.as_dict().items.size()));
    case Value::Kind::kNamespace: return Value(static_cast<int64_t>(in.as_namespace().attrs.items.size()));
    default: throw EvalError("object of type '" + in.type_name() + "' has no len()");
  }
}

Value filter_first_last(const Value& in, bool first) {
  ValueList items = in.iterate();
  if (items.empty()) return Value(Undefined{first ? "first" : "last"});
  return first ? items.front() : items.back();
}

Value filter_items(const Value& in, const ValueList&, const KwArgs&) {
  if (in.is_undefined()) return Value(ValueList{});
  if (!in.is_dict()) throw EvalError("Can only get item pairs from a mapping.");
  return *call_method(in, "items", {}, {});
}

Value filter_title(const Value& in, const ValueList&, const KwArgs&) {
  // jinja2's title: words start after whitespace or one of -({[< and are capitalised.
  std::string s = text_of(in), out;
  bool word_start = true;
  for (char c : s) {
    bool boundary = std::string(" \t\n\r\f\v-({[<").find(c) != std::string::npos;
    out += boundary ? c : (word_start ? py_upper(std::string(1, c))[0] : py_lower(std::string(1, c))[0]);
    word_start = boundary;
  }
  return Value(std::move(out));
}

Value filter_indent(const Value& in, const ValueList& args, const KwArgs& kwargs) {
  const Value& width = arg(args, kwargs, 0, "width", Value(4));
  bool first = arg(args, kwargs, 1, "first", Value(false)).truthy();
  bool blank = arg(args, kwargs, 2, "blank", Value(false)).truthy();
  std::string pad = width.is_string() ? width.as_string() : std::string(static_cast<size_t>(width.as_int()), ' ');
  std::string s = text_of(in), out;
  size_t start = 0;
  bool is_first = true;
  while (start <= s.size()) {
    size_t nl = s.find('\n', start);
    std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    bool indent = (is_first ? first : true) && (blank || !line.empty());
    out += (indent ? pad : "") + line;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
    is_first = false;
  }
  return Value(std::move(out));
}

Value filter_sort(const Value& in, const ValueList& args, const KwArgs& kwargs) {
  bool reverse = arg(args, kwargs, 0, "reverse", Value(false)).truthy();
  bool case_sensitive = arg(args, kwargs, 1, "case_sensitive", Value(false)).truthy();
  const Value& attribute = arg(args, kwargs, 2, "attribute", kNone);
  ValueList items = in.iterate();
  auto key = [&](const Value& v) {
    Value k = attribute.is_none() ? v : attribute_of(v, attribute);
    return (!case_sensitive && k.is_string()) ? Value(py_lower(k.as_string())) : k;
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    int c = compare_values(key(a), key(b));
    return reverse ? c > 0 : c < 0;
  });
  return Value(std::move(items));
}

Value filter_map(const Value& in, const ValueList& args, const KwArgs& kwargs) {
  ValueList out;
  const Value& attribute = arg({}, kwargs, 0, "attribute", kUndef);
  for (const auto& item : in.iterate()) {
    if (!attribute.is_undefined()) {
      Value v = attribute_of(item, attribute);
      out.push_back(v.is_undefined() ? arg({}, kwargs, 0, "default", v) : v);
    } else {
      if (args.empty()) throw EvalError("map requires a filter name or attribute=");
      out.push_back(apply_filter(args[0].str(), item, rest_args(args, 1), kwargs));
    }
  }
  return Value(std::move(out));
}

// select/reject (test on the item) and selectattr/rejectattr (test on an attribute of the item).
Value select_items(const Value& in, const ValueList& args, bool on_attr, bool keep) {
  ValueList out;
  size_t test_at = on_attr ? 1 : 0;
  if (on_attr && args.empty()) throw EvalError("selectattr/rejectattr require an attribute name");
  for (const auto& item : in.iterate()) {
    Value subject = on_attr ? attribute_of(item, args[0]) : item;
    bool ok = args.size() > test_at ? apply_test(args[test_at].str(), subject, rest_args(args, test_at + 1))
                                    : subject.truthy();
    if (ok == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

Value filter_unique(const Value& in, const ValueList&, const KwArgs&) {
  ValueList out;
  for (const auto& item : in.iterate()) {
    bool seen = false;
    for (const auto& o : out) seen = seen || values_equal(o, item);
    if (!seen) out.push_back(item);
  }
  return Value(std::move(out));
}

Value filter_round(const Value& in, const ValueList& args, const KwArgs& kwargs) {
  int64_t precision = arg(args, kwargs, 0, "precision", Value(0)).as_int();
  std::string method = arg(args, kwargs, 1, "method", Value("common")).str();
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = in.as_double() * scale;
  x = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);  // half to even, as Python's round
  return Value(x / scale);
}

const std::unordered_map<std::string, FilterFn>& filters() {
  static const std::unordered_map<std::string, FilterFn> kFilters = {
      {"trim", [](const Value& in, const ValueList& a, const KwArgs& k) {
         return Value(py_strip(text_of(in), arg(a, k, 0, "chars", kNone), true, true)); }},
      {"length", filter_length},
      {"count", filter_length},
      {"upper", [](const Value& in, const ValueList&, const KwArgs&) { return Value(py_upper(text_of(in))); }},
      {"lower", [](const Value& in, const ValueList&, const KwArgs&) { return Value(py_lower(text_of(in))); }},
      {"capitalize", [](const Value& in, const ValueList&, const KwArgs&) { return Value(py_capitalize(text_of(in))); }},
      {"title", filter_title},
      {"tojson", [](const Value& in, const ValueList& a, const KwArgs& k) {
         const Value& indent = arg(a, k, 0, "indent", kNone);
         return Value(in.to_json(indent.is_int() ? static_cast<int>(indent.as_int()) : -1)); }},
      {"join", filter_join},
      {"first", [](const Value& in, const ValueList&, const KwArgs&) { return filter_first_last(in, true); }},
      {"last", [](const Value& in, const ValueList&, const KwArgs&) { return filter_first_last(in, false); }},
      {"default", filter_default},
      {"d", filter_default},
      {"replace", [](const Value& in, const ValueList& a, const KwArgs& k) {
         const Value& count = arg(a, k, 2, "count", kNone);
         return Value(py_replace(text_of(in), arg(a, k, 0, "old", Value("")).str(), arg(a, k, 1, "new", Value("")).str(),
                                 count.is_int() ? count.as_int() : -1)); }},
      {"string", [](const Value& in, const ValueList&, const KwArgs&) { return Value(in.str()); }},
      {"list", [](const Value& in, const ValueList&, const KwArgs&) { return Value(in.iterate()); }},
      {"items", filter_items},
      {"indent", filter_indent},
      {"safe", [](const Value& in, const ValueList&, const KwArgs&) { return in; }},
      {"int", [](const Value& in, const ValueList& a, const KwArgs& k) {
         if (in.is_int()) return Value(in.as_int());
         if (in.is_number()) {
           double d = in.as_double();
           if (!(std::fabs(d) < 9.2e18)) throw EvalError("cannot convert float " + in.str() + " to integer");
           return Value(static_cast<int64_t>(d));
         }
         try { return Value(static_cast<int64_t>(std::stoll(py_strip(in.str(), kNone, true, true)))); }
         catch (const std::exception&) { return arg(a, k, 0, "default", Value(0)); } }},
      {"float", [](const Value& in, const ValueList& a, const KwArgs& k) {
         if (in.is_number()) return Value(in.as_double());
         try { return Value(std::stod(in.str())); }
         catch (const std::exception&) { return arg(a, k, 0, "default", Value(0.0)); } }},
      {"abs", [](const Value& in, const ValueList&, const KwArgs&) {
         return in.is_int() ? Value(static_cast<int64_t>(std::llabs(in.as_int()))) : Value(std::fabs(in.as_double())); }},
      {"round", filter_round},
      {"reverse", [](const Value& in, const ValueList&, const KwArgs&) {
         if (in.is_string()) {
           const Value step(-1);
           return slice(in, nullptr, nullptr, &step);
         }
         ValueList items = in.iterate();
         std::reverse(items.begin(), items.end());
         return Value(std::move(items)); }},
      {"sort", filter_sort},
      {"unique", filter_unique},
      {"map", filter_map},
      {"select", [](const Value& in, const ValueList& a, const KwArgs&) { return select_items(in, a, false, true); }},
      {"reject", [](const Value& in, const ValueList& a, const KwArgs&) { return select_items(in, a, false, false); }},
      {"selectattr", [](const Value& in, const ValueList& a, const KwArgs&) { return select_items(in, a, true, true); }},
      {"rejectattr", [](const Value& in, const ValueList& a, const KwArgs&) { return select_items(in, a, true, false); }},
  };
  return kFilters;
}

bool cmp_arg(const ValueList& args, const char* test) {
  if (args.empty()) throw EvalError(std::string("test '") + test + "' requires an argument");
  return true;
}

const std::unordered_map<std::string, TestFn>& tests() {
  static const std::unordered_map<std::string, TestFn> kTests = {
      {"defined", [](const Value& v, const ValueList&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, const ValueList&) { return v.is_undefined(); }},
      {"none", [](const Value& v, const ValueList&) { return v.is_none(); }},
      {"string", [](const Value& v, const ValueList&) { return v.is_string(); }},
      {"number", [](const Value& v, const ValueList&) { return v.is_number(); }},
      {"integer", [](const Value& v, const ValueList&) { return v.kind() == Value::Kind::kInt; }},
      {"float", [](const Value& v, const ValueList&) { return v.kind() == Value::Kind::kFloat; }},
      {"boolean", [](const Value& v, const ValueList&) { return v.is_bool(); }},
      {"true", [](const Value& v, const ValueList&) { return v.is_bool() && v.truthy(); }},
      {"false", [](const Value& v, const ValueList&) { return v.is_bool() && !v.truthy(); }},
      {"mapping", [](const Value& v, const ValueList&) { return v.is_dict(); }},
      {"iterable", [](const Value& v, const ValueList&) { return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined(); }},
      {"sequence", [](const Value& v, const ValueList&) { return v.is_list() || v.is_dict() || v.is_string(); }},
      {"callable", [](const Value& v, const ValueList&) { return v.is_callable(); }},
      {"odd", [](const Value& v, const ValueList&) { return v.as_int() % 2 != 0; }},
      {"even", [](const Value& v, const ValueList&) { return v.as_int() % 2 == 0; }},
      {"divisibleby", [](const Value& v, const ValueList& a) { return cmp_arg(a, "divisibleby") && a[0].as_int() != 0 && v.as_int() % a[0].as_int() == 0; }},
      {"lower", [](const Value& v, const ValueList&) { return v.is_string() && py_lower(v.as_string()) == v.as_string(); }},
      {"upper", [](const Value& v, const ValueList&) { return v.is_string() && py_upper(v.as_string()) == v.as_string(); }},
      {"eq", [](const Value& v, const ValueList& a) { return cmp_arg(a, "eq") && values_equal(v, a[0]); }},
      {"ne", [](const Value& v, const ValueList& a) { return cmp_arg(a, "ne") && !values_equal(v, a[0]); }},
      {"lt", [](const Value& v, const ValueList& a) { return cmp_arg(a, "lt") && compare_values(v, a[0]) < 0; }},
      {"le", [](const Value& v, const ValueList& a) { return cmp_arg(a, "le") && compare_values(v, a[0]) <= 0; }},
      {"gt", [](const Value& v, const ValueList& a) { return cmp_arg(a, "gt") && compare_values(v, a[0]) > 0; }},
      {"ge", [](const Value& v, const ValueList& a) { return cmp_arg(a, "ge") && compare_values(v, a[0]) >= 0; }},
      {"in", [](const Value& v, const ValueList& a) { return cmp_arg(a, "in") && contains(a[0], v); }},
      {"sameas", [](const Value& v, const ValueList& a) {
         // Identity: only singletons (None, booleans) and shared containers can be the same object.
         return cmp_arg(a, "sameas") && v.kind() == a[0].kind() && (v.is_none() || v.is_bool() ? values_equal(v, a[0]) : false); }},
  };
  return kTests;
}

const std::unordered_map<std::string, std::string>& test_aliases() {
  static const std::unordered_map<std::string, std::string> kAliases = {
      {"==", "eq"}, {"equalto", "eq"}, {"!=", "ne"}, {"<", "lt"}, {"lessthan", "lt"}, {"<=", "le"},
      {">", "gt"}, {"greaterthan", "gt"}, {">=", "ge"}};
  return kAliases;
}

const std::string& canonical_test(const std::string& name) {
  auto it = test_aliases().find(name);
  return it == test_aliases().end() ? name : it->second;
}

}  // namespace

bool has_filter(const std::string& name) { return filters().count(name) > 0; }

bool has_test(const std::string& name) { return tests().count(canonical_test(name)) > 0; }

Value apply_filter(const std::string& name, const Value& input, const ValueList& args, const KwArgs& kwargs) {
  auto it = filters().find(name);
  if (it == filters().end()) throw EvalError("No filter named '" + name + "'.");
  return it->second(input, args, kwargs);
}

bool apply_test(const std::string& name, const Value& input, const ValueList& args) {
  auto it = tests().find(canonical_test(name));
  if (it == tests().end()) throw EvalError("No test named '" + name + "'.");
  return it->second(input, args);
}

}  // namespace pagoda::jinja
