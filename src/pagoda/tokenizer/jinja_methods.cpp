// jinja methods: the Python str and dict methods chat templates call (message.content.strip(),
// message.get('x'), tools.items(), ...), with CPython's semantics for the ASCII range.
#include <algorithm>
#include <cctype>

#include "pagoda/tokenizer/jinja_builtins.h"

namespace pagoda::jinja {
namespace {

bool is_py_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || (c >= '\x1c' && c <= '\x1f');
}

const Value kNone{nullptr};

// str.split(sep=None, maxsplit=-1)
ValueList py_split(const std::string& s, const Value& sep, int64_t maxsplit) {
  ValueList out;
  if (sep.is_none() || sep.is_undefined()) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && is_py_space(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        out.emplace_back(s.substr(i));  // the unsplit remainder keeps its trailing whitespace
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_py_space(s[j])) ++j;
      out.emplace_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  if (!sep.is_string()) throw EvalError("must be str or None, not " + sep.type_name());
  const std::string& d = sep.as_string();
  if (d.empty()) throw EvalError("empty separator");
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    size_t at = s.find(d, start);
    if (at == std::string::npos) break;
    out.emplace_back(s.substr(start, at - start));
    start = at + d.size();
  }
  out.emplace_back(s.substr(start));
  return out;
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) throw EvalError("startswith/endswith first arg must be str or a tuple of str");
    const std::string& x = a.as_string();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list()) {
    for (const auto& a : affix.as_list()) {
      if (one(a)) return true;
    }
    return false;
  }
  return one(affix);
}

std::string py_title(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    bool alpha = std::isalpha(static_cast<unsigned char>(c)) != 0;
    if (alpha) c = static_cast<char>(prev_cased ? std::tolower(static_cast<unsigned char>(c)) : std::toupper(static_cast<unsigned char>(c)));
    prev_cased = alpha;
  }
  return out;
}

std::optional<Value> string_method(const std::string& s, const std::string& name, const ValueList& args,
                                   const KwArgs& kwargs) {
  if (name == "strip") return Value(py_strip(s, arg(args, kwargs, 0, "chars", kNone), true, true));
  if (name == "lstrip") return Value(py_strip(s, arg(args, kwargs, 0, "chars", kNone), true, false));
  if (name == "rstrip") return Value(py_strip(s, arg(args, kwargs, 0, "chars", kNone), false, true));
  if (name == "upper") return Value(py_upper(s));
  if (name == "lower") return Value(py_lower(s));
  if (name == "title") return Value(py_title(s));
  if (name == "capitalize") return Value(py_capitalize(s));
  if (name == "split") {
    const Value& maxsplit = arg(args, kwargs, 1, "maxsplit", Value(-1));
    return Value(py_split(s, arg(args, kwargs, 0, "sep", kNone), maxsplit.as_int()));
  }
  if (name == "startswith" || name == "endswith") {
    if (args.empty()) throw EvalError(name + "() takes at least 1 argument (0 given)");
    return Value(affix_match(s, args[0], name == "startswith"));
  }
  if (name == "replace") {
    if (args.size() < 2) throw EvalError("replace() takes at least 2 arguments");
    if (!args[0].is_string() || !args[1].is_string()) throw EvalError("replace() arguments must be str");
    return Value(py_replace(s, args[0].as_string(), args[1].as_string(), args.size() > 2 ? args[2].as_int() : -1));
  }
  if (name == "find" || name == "count") {
    if (args.empty() || !args[0].is_string()) throw EvalError(name + "() argument must be str");
    const std::string& x = args[0].as_string();
    if (name == "find") {
      size_t at = s.find(x);
      return Value(at == std::string::npos ? int64_t{-1} : static_cast<int64_t>(split_chars(s.substr(0, at)).size()));
    }
    if (x.empty()) return Value(static_cast<int64_t>(split_chars(s).size() + 1));
    int64_t n = 0;
    for (size_t at = s.find(x); at != std::string::npos; at = s.find(x, at + x.size())) ++n;
    return Value(n);
  }
  if (name == "join") {
    std::string out;
    ValueList items = args.empty() ? ValueList{} : args[0].iterate();
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) throw EvalError("sequence item " + std::to_string(i) + ": expected str instance");
      out += (i > 0 ? s : "") + items[i].as_string();
    }
    return Value(std::move(out));
  }
  if (name == "splitlines") {
    ValueList out;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\n' || s[i] == '\r') {
        out.emplace_back(s.substr(start, i - start));
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        start = i + 1;
      }
    }
    if (start < s.size()) out.emplace_back(s.substr(start));
    return Value(std::move(out));
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
    if (s.empty()) return Value(false);
    for (char c : s) {
      auto u = static_cast<unsigned char>(c);
      bool ok = name == "isdigit" ? std::isdigit(u) != 0
                : name == "isspace" ? is_py_space(c)
                : name == "isalpha" ? std::isalpha(u) != 0
                                    : std::isalnum(u) != 0;
      if (!ok) return Value(false);
    }
    return Value(true);
  }
  return std::nullopt;
}

std::optional<Value> dict_method(const ValueDict& d, const std::string& name, const ValueList& args,
                                 const KwArgs& kwargs) {
  if (name == "items" || name == "keys" || name == "values") {
    ValueList out;
    for (const auto& [k, v] : d.items) {
      if (name == "items") out.emplace_back(ValueList{Value(k), v});
      else out.push_back(name == "keys" ? Value(k) : v);
    }
    return Value(std::move(out));
  }
  if (name == "get") {
    if (args.empty()) throw EvalError("get expected at least 1 argument, got 0");
    const Value* v = args[0].is_string() ? d.find(args[0].as_string()) : nullptr;
    return v ? *v : arg(args, kwargs, 1, "default", kNone);
  }
  return std::nullopt;
}

}  // namespace

std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
  if (!chars.is_none() && !chars.is_undefined() && !chars.is_string()) {
    throw EvalError("strip arg must be None or str");
  }
  if (chars.is_string()) {
    // Strip whole characters so that a multi-byte character set works as in Python.
    auto cs = split_chars(s);
    auto set = split_chars(chars.as_string());
    auto in_set = [&](const std::string& c) { return std::find(set.begin(), set.end(), c) != set.end(); };
    size_t b = 0, e = cs.size();
    if (left) while (b < e && in_set(cs[b])) ++b;
    if (right) while (e > b && in_set(cs[e - 1])) --e;
    std::string out;
    for (size_t i = b; i < e; ++i) out += cs[i];
    return out;
  }
  size_t b = 0, e = s.size();
  if (left) while (b < e && is_py_space(s[b])) ++b;
  if (right) while (e > b && is_py_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string py_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string py_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string py_capitalize(const std::string& s) {
  std::string out = py_lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts the replacement between every character
    auto chars = split_chars(s);
    int64_t n = 0;
    for (const auto& c : chars) {
      if (count < 0 || n++ < count) out += repl;
      out += c;
    }
    if (count < 0 || n < count) out += repl;
    return out;
  }
  size_t start = 0;
  int64_t n = 0;
  for (size_t at = s.find(old); at != std::string::npos && (count < 0 || n < count); at = s.find(old, start), ++n) {
    out += s.substr(start, at - start) + repl;
    start = at + old.size();
  }
  return out + s.substr(start);
}

std::optional<Value> call_method(const Value& obj, const std::string& name, const ValueList& args,
                                 const KwArgs& kwargs) {
  if (obj.is_string()) return string_method(obj.as_string(), name, args, kwargs);
  if (obj.is_dict()) return dict_method(obj.as_dict(), name, args, kwargs);
  return std::nullopt;
}

}  // namespace pagoda::jinja
