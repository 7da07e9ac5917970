// jinja::Value: conversions, Python str()/repr()/json.dumps formatting, equality and ordering.
#include "pagoda/tokenizer/jinja_value.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "pagoda/tokenizer/utf8.h"

namespace pagoda::jinja {

const Value* ValueDict::find(const std::string& key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void ValueDict::set(const std::string& key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(key, std::move(value));
}

namespace {
template <typename Json>
Value value_from_json(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return Value(nullptr);
    case Json::value_t::boolean:
      return Value(j.template get<bool>());
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return Value(j.template get<int64_t>());
    case Json::value_t::number_float:
      return Value(j.template get<double>());
    case Json::value_t::string:
      return Value(j.template get<std::string>());
    case Json::value_t::array: {
      ValueList list;
      for (const auto& item : j) list.push_back(value_from_json(item));
      return Value(std::move(list));
    }
    case Json::value_t::object: {
      ValueDict dict;
      for (const auto& [k, v] : j.items()) dict.items.emplace_back(k, value_from_json(v));
      return Value(std::move(dict));
    }
    default:
      return Value();  // discarded / binary: nothing a template can use
  }
}
}  // namespace

Value Value::from_json(const nlohmann::json& j) { return value_from_json(j); }
Value Value::from_json(const nlohmann::ordered_json& j) { return value_from_json(j); }

Value Value::callable(std::string name, decltype(Callable::fn) fn) {
  return Value(std::make_shared<Callable>(Callable{std::move(name), std::move(fn)}));
}

int64_t Value::as_int() const {
  if (kind() == Kind::kBool) return std::get<bool>(v_) ? 1 : 0;
  return std::get<int64_t>(v_);
}

double Value::as_double() const {
  if (kind() == Kind::kFloat) return std::get<double>(v_);
  return static_cast<double>(as_int());
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return std::get<bool>(v_);
    case Kind::kInt:
      return std::get<int64_t>(v_) != 0;
    case Kind::kFloat:
      return std::get<double>(v_) != 0.0;
    case Kind::kString:
      return !as_string().empty();
    case Kind::kList:
      return !as_list().empty();
    case Kind::kDict:
      return !as_dict().items.empty();
    default:
      return true;
  }
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then Python's repr layout: fixed for 1e-4 <= |d| < 1e16, else exponent.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  size_t e_pos = sci.find('e');
  std::string mantissa = sci.substr(0, e_pos);
  int exp = std::stoi(sci.substr(e_pos + 1));
  bool negative = !mantissa.empty() && mantissa[0] == '-';
  std::string digits;
  for (char c : mantissa) {
    if (c >= '0' && c <= '9') digits += c;
  }
  std::string out = negative ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out += digits + std::string(static_cast<size_t>(exp + 1 - static_cast<int>(digits.size())), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exp + 1)) + "." + digits.substr(static_cast<size_t>(exp + 1));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp));
  return out;
}

namespace {

std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(quote)) out += std::string("\\") + quote;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  return out + quote;
}

// json.dumps string escaping with ensure_ascii=False: only quotes, backslashes and control characters.
void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
  }
  out += '"';
}

void json_dump(std::string& out, const Value& v, int indent, int depth) {
  auto newline = [&](int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * level), ' ');
  };
  const char* item_sep = indent < 0 ? ", " : ",";
  switch (v.kind()) {
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.truthy() ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: {
      double d = v.as_double();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
      else out += format_float(d);
      return;
    }
    case Value::Kind::kString: json_string(out, v.as_string()); return;
    case Value::Kind::kList: {
      const auto& list = v.as_list();
      if (list.empty()) { out += "[]"; return; }
      out += '[';
      for (size_t i = 0; i < list.size(); ++i) {
        if (i > 0) out += item_sep;
        newline(depth + 1);
        json_dump(out, list[i], indent, depth + 1);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::kDict: {
      const auto& items = v.as_dict().items;
      if (items.empty()) { out += "{}"; return; }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += item_sep;
        newline(depth + 1);
        json_string(out, items[i].first);
        out += ": ";
        json_dump(out, items[i].second, indent, depth + 1);
      }
      newline(depth);
      out += '}';
      return;
    }
    default:
      throw EvalError("Object of type " + v.type_name() + " is not JSON serializable");
  }
}

}  // namespace

std::string Value::str() const {
  switch (kind()) {
    case Kind::kUndefined: return "";
    case Kind::kString: return as_string();
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind()) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return std::get<bool>(v_) ? "True" : "False";
    case Kind::kInt: return std::to_string(std::get<int64_t>(v_));
    case Kind::kFloat: return format_float(std::get<double>(v_));
    case Kind::kString: return repr_string(as_string());
    case Kind::kList: {
      std::string out = "[";
      const auto& list = as_list();
      for (size_t i = 0; i < list.size(); ++i) out += (i > 0 ? ", " : "") + list[i].repr();
      return out + "]";
    }
    case Kind::kDict: {
      std::string out = "{";
      const auto& items = as_dict().items;
      for (size_t i = 0; i < items.size(); ++i) {
        out += (i > 0 ? ", " : "") + repr_string(items[i].first) + ": " + items[i].second.repr();
      }
      return out + "}";
    }
    case Kind::kNamespace: return "<Namespace>";
    case Kind::kCallable: return "<function " + as_callable().name + ">";
  }
  return "";
}

std::string Value::type_name() const {
  static const char* kNames[] = {"Undefined", "NoneType", "bool", "int",       "float",
                                 "str",       "list",     "dict", "Namespace", "function"};
  return kNames[static_cast<int>(kind())];
}

std::string Value::to_json(int indent) const {
  std::string out;
  json_dump(out, *this, indent, 0);
  return out;
}

std::vector<std::string> split_chars(const std::string& s) {
  std::vector<std::string> chars;
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8::char_length(s, i);
    chars.push_back(s.substr(i, n));
    i += n;
  }
  return chars;
}

ValueList Value::iterate() const {
  ValueList out;
  switch (kind()) {
    case Kind::kUndefined: return out;
    case Kind::kList: return as_list();
    case Kind::kDict:
      for (const auto& [k, v] : as_dict().items) out.emplace_back(k);
      return out;
    case Kind::kString:
      for (auto& c : split_chars(as_string())) out.emplace_back(std::move(c));
      return out;
    default:
      throw EvalError("'" + type_name() + "' object is not iterable");
  }
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const auto &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!values_equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const auto &x = a.as_dict(), &y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.find(k);
        if (!other || !values_equal(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace: return &a.as_namespace() == &b.as_namespace();
    case Value::Kind::kCallable: return &a.as_callable() == &b.as_callable();
    default: return false;
  }
}

int compare_values(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
    double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.as_string().compare(b.as_string());  // UTF-8 byte order is code-point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list()) {
    const auto &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!values_equal(x[i], y[i])) return compare_values(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw EvalError("comparison not supported between instances of '" + a.type_name() + "' and '" +
                  b.type_name() + "'");
}

}  // namespace pagoda::jinja
