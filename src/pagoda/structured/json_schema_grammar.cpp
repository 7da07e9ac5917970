// JSON Schema to grammar (json_schema_grammar.h). One rule per schema node; $ref targets get their rule
// once, declared before they are filled, so recursive schemas refer to themselves.
#include "pagoda/structured/json_schema_grammar.h"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "pagoda/core/error.h"
#include "pagoda/structured/regex_grammar.h"

namespace pagoda::structured {
namespace {

using json = nlohmann::ordered_json;  // properties keep the client's order
using Sequence = GrammarBuilder::Sequence;

constexpr int kMaxIndent = 24;           // spaces or tabs after a line break between tokens
constexpr int kMaxDepth = 64;            // nesting of schemas (refs are rules, so recursion is not nesting)
constexpr int64_t kMaxCount = 4096;      // minItems, maxItems, minLength, maxLength
constexpr double kMaxIntegerBound = 1e18;

const std::set<std::string> kAnnotations = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "format", "deprecated",
    "readOnly", "writeOnly", "contentMediaType", "contentEncoding", "$anchor", "discriminator", "$defs",
    "definitions", "strict"};
const std::set<std::string> kSupported = {
    "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "nullable",                 // any
    "minLength", "maxLength", "pattern",                                                    // string
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",                           // numbers
    "properties", "required", "additionalProperties",                                      // object
    "items", "prefixItems", "minItems", "maxItems", "uniqueItems"};                         // array

[[noreturn]] void fail(const std::string& why) { throw InvalidRequest("JSON schema: " + why); }

bool is_annotation(const std::string& key) { return kAnnotations.count(key) > 0 || key.starts_with("x-"); }

std::string nines(size_t n) { return std::string(n, '9'); }
std::string zeros(size_t n) { return std::string(n, '0'); }
std::string power_of_ten(size_t digits) {  // the smallest number of `digits` digits
  std::string s(digits, '0');
  s[0] = '1';
  return s;
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const json& root) : root_(root) {}

  Grammar build_root(const json* schema) {
    const int value = schema != nullptr ? compile(*schema, 0) : object_any();
    const int root = b_.rule("root", {{ref(ws()), ref(value), ref(ws())}});
    try {
      return b_.build(root);
    } catch (const EmptyGrammar&) {
      fail("no finite JSON value satisfies it (a '$ref' cycle with no way out, such as {\"$ref\": \"#\"} or a "
           "required property whose schema needs itself)");
    }
  }

 private:
  const json& root_;
  GrammarBuilder b_;
  std::map<std::string, int> refs_;
  int ws_ = -1, string_ = -1, string_char_ = -1, escape_ = -1, number_ = -1, value_ = -1, object_ = -1, array_ = -1, digits_ = -1;
  int counter_ = 0;

  static Symbol ref(int rule) { return GrammarBuilder::ref(rule); }
  std::string name(const std::string& what) { return fmt::format("{}_{}", what, counter_++); }
  Symbol ch(uint32_t lo, uint32_t hi) { return b_.chars(CharSet::range(lo, hi)); }
  Symbol ch(uint32_t c) { return ch(c, c); }
  static Sequence cat(Sequence a, const Sequence& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  // --- The generic JSON rules, each made once when first needed.
  // Nothing, one space, or a line break and an indent: what compact and pretty-printed JSON use. Runs of
  // blank lines and spaces are not offered, so a weak model cannot pad its output with them.
  int ws() {
    if (ws_ < 0) {
      const int indent = b_.repeat("indent", {b_.chars(CharSet::of(' ').add('\t', '\t'))}, 0, kMaxIndent);
      ws_ = b_.rule("ws", {{}, {ch(' ')}, {ch('\n'), ref(indent)}});
    }
    return ws_;
  }

  // One character of a string's text: anything but '"', '\' and control characters, or an escape. A \u
  // escape never names a surrogate (a lone one is not valid UTF-16, and strict parsers refuse it).
  int string_char() {
    if (string_char_ < 0) {
      const Symbol hex = b_.chars(CharSet::range('0', '9').add('a', 'f').add('A', 'F'));
      const int unicode = b_.rule("unicode_escape", {{ch('0', '9'), hex, hex, hex},
                                                     {b_.chars(CharSet::range('a', 'c').add('A', 'C').add('e', 'f').add('E', 'F')), hex, hex, hex},
                                                     {ch('d'), ch('0', '7'), hex, hex},
                                                     {ch('D'), ch('0', '7'), hex, hex}});
      const Symbol simple = b_.chars(CharSet::of('"').add('\\', '\\').add('/', '/').add('b', 'b').add('f', 'f')
                                         .add('n', 'n').add('r', 'r').add('t', 't'));
      escape_ = b_.rule("escape", {{simple}, {ch('u'), ref(unicode)}});
      string_char_ = b_.rule("string_char", {{plain()}, {ch('\\'), ref(escape_)}});
    }
    return string_char_;
  }

  Symbol plain() { return b_.chars(CharSet::any().minus(CharSet::range(0, 0x1F).add('"', '"').add('\\', '\\'))); }

  int string_any() {
    if (string_ < 0) {
      // chars ::= plain chars | '\' escape chars | ε: the plain set is a loop set (the mask's shortcut).
      const int chars = b_.add_rule("string_chars");
      const Symbol p = plain();
      b_.mark_loop_set(p);
      b_.add_alternative(chars, {p, ref(chars)});
      string_char();
      b_.add_alternative(chars, {ch('\\'), ref(escape_), ref(chars)});
      b_.add_alternative(chars, {});
      string_ = b_.rule("string", {{ch('"'), ref(chars), ch('"')}});
    }
    return string_;
  }

  int digits() {  // [0-9]*
    if (digits_ < 0) digits_ = b_.star("digits", {ch('0', '9')});
    return digits_;
  }

  Sequence unsigned_integer() { return {ref(b_.rule(name("uint"), {{ch('0')}, {ch('1', '9'), ref(digits())}}))}; }

  int number() {
    if (number_ >= 0) return number_;
    // Exponents have one or two digits: 1e400 is valid JSON that strict parsers refuse (overflow).
    const int exponent_digit = b_.rule(name("exponent_digit"), {{ch('0', '9')}, {}});
    const int fraction = b_.rule(name("fraction"), {{ch('.'), ch('0', '9'), ref(digits())}, {}});
    const int exponent = b_.rule(name("exponent"), {{b_.chars(CharSet::of('e').add('E', 'E')),
                                                     ref(b_.rule(name("sign"), {{b_.chars(CharSet::of('+').add('-', '-'))}, {}})),
                                                     ch('0', '9'), ref(exponent_digit)},
                                                    {}});
    const Sequence body = cat(unsigned_integer(), {ref(fraction), ref(exponent)});
    number_ = b_.rule("number", {body, cat({ch('-')}, body)});
    return number_;
  }

  int value_any() {
    if (value_ < 0) {
      value_ = b_.add_rule("value");
      for (int r : {object_any(), array_any(), string_any(), number()}) b_.add_alternative(value_, {ref(r)});
      for (const char* lit : {"true", "false", "null"}) b_.add_alternative(value_, b_.literal(lit));
    }
    return value_;
  }

  // "{" ws ( member ws ("," ws member ws)* )? "}", with `value` the rule of the members' values.
  int map_of(int value, const std::string& what) {
    const Sequence member{ref(string_any()), ref(ws()), ch(':'), ref(ws()), ref(value), ref(ws())};
    const int more = b_.star(name(what + "_more"), cat({ch(','), ref(ws())}, member));
    const int members = b_.rule(name(what + "_members"), {cat(member, {ref(more)}), {}});
    return b_.rule(name(what), {{ch('{'), ref(ws()), ref(members), ch('}')}});
  }

  int object_any() {
    if (object_ < 0) {
      object_ = b_.add_rule("object");  // declared first: values nest objects
      const int body = map_of(value_any(), "object_any");
      b_.add_alternative(object_, {ref(body)});
    }
    return object_;
  }

  int array_any() {
    if (array_ < 0) {
      array_ = b_.add_rule("array");
      b_.add_alternative(array_, {ref(list_of(value_any(), 0, -1, "array_any"))});
    }
    return array_;
  }

  // "[" ws ( item ws ("," ws item ws){min-1, max-1} )? "]"
  int list_of(int item, int64_t min, int64_t max, const std::string& what) {
    if (max == 0) return b_.rule(name(what), {{ch('['), ref(ws()), ch(']')}});
    const Sequence first{ref(item), ref(ws())};
    const int rest = b_.repeat(name(what + "_rest"), {ch(','), ref(ws()), ref(item), ref(ws())},
                               static_cast<int>(std::max<int64_t>(min - 1, 0)), max < 0 ? -1 : static_cast<int>(max - 1));
    std::vector<Sequence> body{cat(first, {ref(rest)})};
    if (min == 0) body.push_back({});
    const int items = b_.rule(name(what + "_items"), std::move(body));
    return b_.rule(name(what), {{ch('['), ref(ws()), ref(items), ch(']')}});
  }

  // --- Schemas.
  int compile(const json& s, int depth) {
    if (depth > kMaxDepth) fail("nested too deeply");
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail("the schema 'false' allows no value");
      return value_any();
    }
    if (!s.is_object()) fail("a schema must be an object or a boolean");
    for (const auto& [key, v] : s.items())
      if (!is_annotation(key) && kSupported.count(key) == 0) fail(fmt::format("the keyword '{}' is not supported", key));
    const bool nullable = s.contains("nullable") && s["nullable"].is_boolean() && s["nullable"].get<bool>();

    auto only = [&](const char* keyword) {  // a keyword whose siblings may only be annotations
      for (const auto& [key, v] : s.items())
        if (key != keyword && key != "nullable" && !is_annotation(key))
          fail(fmt::format("'{}' together with '{}' is not supported", keyword, key));
    };
    std::vector<Sequence> alts;
    if (s.contains("$ref")) {
      only("$ref");
      alts.push_back({ref(resolve(s["$ref"], depth))});
    } else if (s.contains("enum") || s.contains("const")) {
      if (s.contains("enum") && (!s["enum"].is_array() || s["enum"].empty())) fail("'enum' must be a non-empty array");
      const json values = s.contains("const") ? json::array({s["const"]}) : s["enum"];
      for (const json& v : values) alts.push_back(b_.literal(v.dump()));
    } else if (s.contains("anyOf") || s.contains("oneOf")) {
      const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
      only(key);
      if (!s[key].is_array() || s[key].empty()) fail(fmt::format("'{}' must be a non-empty array", key));
      for (const json& sub : s[key]) alts.push_back({ref(compile(sub, depth + 1))});
    } else if (s.contains("allOf")) {
      only("allOf");
      if (!s["allOf"].is_array() || s["allOf"].size() != 1) fail("'allOf' is supported with one schema only");
      alts.push_back({ref(compile(s["allOf"][0], depth + 1))});
    } else {
      for (const std::string& type : types(s)) alts.push_back({ref(typed(type, s, depth))});
    }
    if (nullable) alts.push_back(b_.literal("null"));
    return b_.rule(name("schema"), std::move(alts));
  }

  int resolve(const json& ref_value, int depth) {
    if (!ref_value.is_string()) fail("'$ref' must be a string");
    const std::string target = ref_value.get<std::string>();
    const auto it = refs_.find(target);
    if (it != refs_.end()) return it->second;
    if (target != "#" && !target.starts_with("#/")) fail(fmt::format("'$ref' {}: only references inside the schema are supported", target));
    const json* node = &root_;
    if (target != "#") {
      try {
        node = &root_.at(json::json_pointer(target.substr(1)));
      } catch (const json::exception&) {
        fail(fmt::format("'$ref' {} does not resolve", target));
      }
    }
    const int r = b_.add_rule(name("ref"));
    refs_.emplace(target, r);
    b_.add_alternative(r, {ref(compile(*node, depth + 1))});
    return r;
  }

  std::vector<std::string> types(const json& s) {
    if (s.contains("type")) {
      const json& t = s["type"];
      std::vector<std::string> out;
      if (t.is_string()) {
        out.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const json& e : t) {
          if (!e.is_string()) fail("'type' must be a string or an array of strings");
          out.push_back(e.get<std::string>());
        }
      } else {
        fail("'type' must be a string or a non-empty array of strings");
      }
      return out;
    }
    if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) return {"object"};
    if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) return {"array"};
    if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern")) return {"string"};
    if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum"))
      return {"number"};
    return {"any"};
  }

  int typed(const std::string& type, const json& s, int depth) {
    if (type == "any") return value_any();
    if (type == "string") return string_schema(s);
    if (type == "integer") return integer_schema(s);
    if (type == "number") return number_schema(s);
    if (type == "boolean") return b_.rule(name("boolean"), {b_.literal("true"), b_.literal("false")});
    if (type == "null") return b_.rule(name("null"), {b_.literal("null")});
    if (type == "object") return object_schema(s, depth);
    if (type == "array") return array_schema(s, depth);
    fail(fmt::format("unknown type '{}'", type));
  }

  static std::optional<int64_t> count(const json& s, const char* key) {
    if (!s.contains(key)) return std::nullopt;
    if (!s[key].is_number_unsigned()) fail(fmt::format("'{}' must be a non-negative integer", key));
    const uint64_t v = s[key].get<uint64_t>();
    if (v > static_cast<uint64_t>(kMaxCount)) fail(fmt::format("'{}' above {} is not supported", key, kMaxCount));
    return static_cast<int64_t>(v);
  }

  int string_schema(const json& s) {
    const std::optional<int64_t> min = count(s, "minLength"), max = count(s, "maxLength");
    if (s.contains("pattern")) {
      if (min || max) fail("'pattern' together with 'minLength' or 'maxLength' is not supported");
      if (!s["pattern"].is_string()) fail("'pattern' must be a string");
      const Sequence body = add_regex(b_, s["pattern"].get<std::string>(), RegexText::kJsonString, /*search=*/true);
      return b_.rule(name("pattern_string"), {cat(cat({ch('"')}, body), {ch('"')})});
    }
    if (!min && !max) return string_any();
    if (min && max && *max < *min) fail("'maxLength' is below 'minLength'");
    const int chars = b_.repeat(name("string_chars"), {ref(string_char())}, static_cast<int>(min.value_or(0)),
                                max ? static_cast<int>(*max) : -1);
    return b_.rule(name("string"), {{ch('"'), ref(chars), ch('"')}});
  }

  // The bounds as the smallest and largest integer allowed (draft 4's boolean exclusive forms included).
  void integer_bounds(const json& s, std::optional<int64_t>& lo, std::optional<int64_t>& hi) {
    auto bound = [&](const char* key) -> std::optional<double> {
      if (!s.contains(key) || s[key].is_boolean()) return std::nullopt;
      if (!s[key].is_number()) fail(fmt::format("'{}' must be a number", key));
      const double v = s[key].get<double>();
      if (!(std::fabs(v) <= kMaxIntegerBound)) fail(fmt::format("'{}' beyond 1e18 is not supported", key));
      return v;
    };
    const bool draft4_exclusive_min = s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_boolean() &&
                                      s["exclusiveMinimum"].get<bool>();
    const bool draft4_exclusive_max = s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_boolean() &&
                                      s["exclusiveMaximum"].get<bool>();
    if (auto v = bound("minimum")) lo = static_cast<int64_t>(draft4_exclusive_min ? std::floor(*v) + 1 : std::ceil(*v));
    if (auto v = bound("exclusiveMinimum")) lo = std::max(lo.value_or(INT64_MIN), static_cast<int64_t>(std::floor(*v) + 1));
    if (auto v = bound("maximum")) hi = static_cast<int64_t>(draft4_exclusive_max ? std::ceil(*v) - 1 : std::floor(*v));
    if (auto v = bound("exclusiveMaximum")) hi = std::min(hi.value_or(INT64_MAX), static_cast<int64_t>(std::ceil(*v) - 1));
    if (lo && hi && *lo > *hi) fail("no integer lies between the minimum and the maximum");
  }

  // Digit strings of equal length in [lo, hi] (both as written, leading zeros included).
  Sequence same_length(const std::string& lo, const std::string& hi) {
    if (lo.empty()) return {};
    if (lo[0] == hi[0]) return cat({ch(static_cast<uint32_t>(lo[0]))}, same_length(lo.substr(1), hi.substr(1)));
    const size_t rest = lo.size() - 1;
    if (lo.substr(1) == zeros(rest) && hi.substr(1) == nines(rest)) {
      Sequence seq{ch(static_cast<uint32_t>(lo[0]), static_cast<uint32_t>(hi[0]))};
      for (size_t i = 0; i < rest; ++i) seq.push_back(ch('0', '9'));
      return seq;
    }
    std::vector<Sequence> alts;
    alts.push_back(cat({ch(static_cast<uint32_t>(lo[0]))}, same_length(lo.substr(1), nines(rest))));
    if (lo[0] + 1 <= hi[0] - 1) {
      Sequence mid{ch(static_cast<uint32_t>(lo[0] + 1), static_cast<uint32_t>(hi[0] - 1))};
      for (size_t i = 0; i < rest; ++i) mid.push_back(ch('0', '9'));
      alts.push_back(mid);
    }
    alts.push_back(cat({ch(static_cast<uint32_t>(hi[0]))}, same_length(zeros(rest), hi.substr(1))));
    return {ref(b_.rule(name("digits_range"), std::move(alts)))};
  }

  // Non-negative integers in [lo, hi] (hi unset: unbounded), without leading zeros.
  std::vector<Sequence> non_negative(int64_t lo, std::optional<int64_t> hi) {
    const std::string a = std::to_string(lo);
    std::vector<Sequence> alts;
    if (hi && std::to_string(*hi).size() == a.size()) {
      alts.push_back(same_length(a, std::to_string(*hi)));
      return alts;
    }
    alts.push_back(same_length(a, nines(a.size())));
    const size_t top = hi ? std::to_string(*hi).size() : 0;
    for (size_t d = a.size() + 1; hi && d < top; ++d) alts.push_back(same_length(power_of_ten(d), nines(d)));
    if (hi) {
      alts.push_back(same_length(power_of_ten(top), std::to_string(*hi)));
    } else {
      Sequence longer{ch('1', '9')};
      for (size_t i = 0; i < a.size(); ++i) longer.push_back(ch('0', '9'));
      longer.push_back(ref(digits()));
      alts.push_back(longer);
    }
    return alts;
  }

  int integer_schema(const json& s) {
    std::optional<int64_t> lo, hi;
    integer_bounds(s, lo, hi);
    std::vector<Sequence> alts;
    if (!lo || *lo < 0) {  // negative values, as "-" and a magnitude in [max(1, -hi), -lo]
      const int64_t mag_lo = hi && *hi < 0 ? -*hi : 1;
      std::optional<int64_t> mag_hi;
      if (lo) mag_hi = -*lo;
      for (Sequence& m : non_negative(mag_lo, mag_hi)) alts.push_back(cat({ch('-')}, m));
    }
    if (!hi || *hi >= 0) {
      for (Sequence& m : non_negative(lo ? std::max<int64_t>(*lo, 0) : 0, hi)) alts.push_back(std::move(m));
    }
    return b_.rule(name("integer"), std::move(alts));
  }

  // --- Numbers with bounds: written as plain decimals (no exponent), split by sign, then by integer part
  // (the bound's own integer part, where the fraction is compared digit by digit, or one strictly between).
  struct Decimal {
    bool negative = false;
    int64_t integer = 0;   // magnitude's integer part
    std::string fraction;  // its fraction digits, no trailing zeros
  };

  struct Bound {
    Decimal value;
    bool strict = false;
  };

  static Decimal to_decimal(const json& v, const char* key) {
    // The shortest text that reads back as the same double ("0.1", "1e-05"), made plain.
    std::string text = v.dump();
    Decimal d;
    if (!text.empty() && text[0] == '-') {
      d.negative = true;
      text.erase(0, 1);
    }
    int exponent = 0;
    if (const size_t e = text.find_first_of("eE"); e != std::string::npos) {
      exponent = std::stoi(text.substr(e + 1));
      text.resize(e);
    }
    std::string digits = text;
    size_t point = digits.find('.');
    if (point == std::string::npos) point = digits.size();
    else digits.erase(point, 1);
    const long shifted = static_cast<long>(point) + exponent;  // where the point is after the exponent
    if (shifted > 18) fail(fmt::format("'{}' beyond 1e18 is not supported", key));
    if (shifted < -30) fail(fmt::format("'{}' has more than 30 decimals", key));
    std::string int_part, frac_part;
    if (shifted <= 0) {
      frac_part = std::string(static_cast<size_t>(-shifted), '0') + digits;
    } else if (static_cast<size_t>(shifted) >= digits.size()) {
      int_part = digits + std::string(static_cast<size_t>(shifted) - digits.size(), '0');
    } else {
      int_part = digits.substr(0, static_cast<size_t>(shifted));
      frac_part = digits.substr(static_cast<size_t>(shifted));
    }
    while (!frac_part.empty() && frac_part.back() == '0') frac_part.pop_back();
    d.integer = int_part.empty() ? 0 : std::stoll(int_part);
    d.fraction = frac_part;
    if (d.integer == 0 && d.fraction.empty()) d.negative = false;  // -0
    return d;
  }

  // Fraction digits D (after the integer part) with lo <= .D <= hi (strict where asked); an unset bound is
  // no bound. A rule per (position, still equal to lo's digits, still equal to hi's digits); past both
  // bounds' lengths the rule refers to itself (only zeros keep a tight bound tight).
  int fraction_rule(const std::optional<Bound>& lo, const std::optional<Bound>& hi) {
    const std::string l = lo ? lo->value.fraction : "", h = hi ? hi->value.fraction : "";
    const size_t longest = std::max(l.size(), h.size());
    std::map<std::tuple<size_t, bool, bool>, int> rules;
    std::function<int(size_t, bool, bool, bool)> make = [&](size_t i, bool tight_lo, bool tight_hi, bool top) -> int {
      if (!tight_lo && !tight_hi && !top) return digits();
      const auto key = std::make_tuple(std::min(i, longest), tight_lo, tight_hi);
      if (!top)
        if (const auto it = rules.find(key); it != rules.end()) return it->second;
      const int r = b_.add_rule(name("fraction"));
      if (!top) rules.emplace(key, r);
      // Ending here: the fraction equals the digits so far.
      const bool lo_ok = !tight_lo || (i >= l.size() && !(lo && lo->strict));
      const bool hi_ok = !tight_hi || i < h.size() || !(hi && hi->strict);
      if (lo_ok && hi_ok && !top) b_.add_alternative(r, {});  // after "." at least one digit
      const char lo_d = tight_lo && i < l.size() ? l[i] : '0';
      const char hi_d = tight_hi ? (i < h.size() ? h[i] : '0') : '9';
      for (char d = lo_d; d <= hi_d; ++d) {
        const bool next_lo = tight_lo && d == lo_d, next_hi = tight_hi && d == hi_d;
        if (!next_lo && !next_hi && d != lo_d && d != hi_d) {  // the digits strictly between: one set
          const char last = tight_hi ? static_cast<char>(hi_d - 1) : hi_d;
          b_.add_alternative(r, {ch(static_cast<uint32_t>(d), static_cast<uint32_t>(last)), ref(digits())});
          d = last;
          continue;
        }
        b_.add_alternative(r, {ch(static_cast<uint32_t>(d)), ref(make(i + 1, next_lo, next_hi, false))});
      }
      return r;
    };
    // "." and at least one digit, or nothing.
    const int body = make(0, lo.has_value(), hi.has_value(), /*top=*/true);
    std::vector<Sequence> alts{{ch('.'), ref(body)}};
    const bool empty_ok = (!lo || (lo->value.fraction.empty() && !lo->strict)) && (!hi || !hi->value.fraction.empty() || !hi->strict);
    if (empty_ok) alts.push_back({});
    return b_.rule(name("fraction_part"), std::move(alts));
  }

  // Non-negative decimals between lo and hi (magnitudes; hi unset: unbounded).
  std::vector<Sequence> magnitudes(const Bound& lo, const std::optional<Bound>& hi) {
    std::vector<Sequence> alts;
    const int64_t a = lo.value.integer;
    auto integer = [&](int64_t v) { return b_.literal(std::to_string(v)); };
    if (hi && hi->value.integer == a) {
      alts.push_back(cat(integer(a), {ref(fraction_rule(lo, hi))}));
      return alts;
    }
    alts.push_back(cat(integer(a), {ref(fraction_rule(lo, std::nullopt))}));
    const std::optional<int64_t> inner_hi = hi ? std::optional<int64_t>(hi->value.integer - 1) : std::nullopt;
    if (!inner_hi || *inner_hi >= a + 1) {
      const int any_fraction = fraction_rule(std::nullopt, std::nullopt);
      for (Sequence& i : non_negative(a + 1, inner_hi)) alts.push_back(cat(std::move(i), {ref(any_fraction)}));
    }
    // The bound's own integer part, unless the bound is that integer, excluded (nothing below .0 follows).
    if (hi && !(hi->value.fraction.empty() && hi->strict))
      alts.push_back(cat(integer(hi->value.integer), {ref(fraction_rule(std::nullopt, hi))}));
    return alts;
  }

  static int compare(const Decimal& x, const Decimal& y) {  // magnitudes
    if (x.integer != y.integer) return x.integer < y.integer ? -1 : 1;
    return x.fraction < y.fraction ? -1 : x.fraction > y.fraction ? 1 : 0;  // no trailing zeros: text order
  }
  static int compare_signed(const Decimal& x, const Decimal& y) {
    if (x.negative != y.negative) return x.negative ? -1 : 1;
    return x.negative ? -compare(x, y) : compare(x, y);
  }

  int bounded_number(const json& s) {
    std::optional<Bound> lo, hi;
    auto read = [&](const char* key, bool strict, std::optional<Bound>& out, bool is_lo) {
      if (!s.contains(key) || s[key].is_boolean()) return;
      if (!s[key].is_number()) fail(fmt::format("'{}' must be a number", key));
      const Bound b{to_decimal(s[key], key), strict};
      // The tighter of minimum and exclusiveMinimum (maximum and exclusiveMaximum).
      if (out) {
        const int c = compare_signed(b.value, out->value);
        if (!(is_lo ? c > 0 : c < 0) && !(c == 0 && b.strict)) return;
      }
      out = b;
    };
    const auto draft4 = [&](const char* key) { return s.contains(key) && s[key].is_boolean() && s[key].get<bool>(); };
    read("minimum", draft4("exclusiveMinimum"), lo, true);
    read("exclusiveMinimum", true, lo, true);
    read("maximum", draft4("exclusiveMaximum"), hi, false);
    read("exclusiveMaximum", true, hi, false);
    std::vector<Sequence> alts;
    const bool hi_non_negative = !hi || !hi->value.negative;
    const bool lo_negative = !lo || lo->value.negative;
    // Negative values: "-" and a magnitude in (0 or |hi|, |lo|].
    if (lo_negative) {
      const Bound mag_lo = hi_non_negative ? Bound{Decimal{}, true} : Bound{hi->value, hi->strict};
      std::optional<Bound> mag_hi;
      if (lo) mag_hi = Bound{lo->value, lo->strict};
      if (!mag_hi || compare(mag_lo.value, mag_hi->value) < 0 ||
          (compare(mag_lo.value, mag_hi->value) == 0 && !mag_lo.strict && !mag_hi->strict))
        for (Sequence& m : magnitudes(mag_lo, mag_hi)) alts.push_back(cat({ch('-')}, m));
    }
    // Zero and positive values in [max(lo, 0), hi].
    if (hi_non_negative && !(hi && hi->value.integer == 0 && hi->value.fraction.empty() && hi->strict)) {
      const Bound mag_lo = lo_negative ? Bound{Decimal{}, false} : *lo;
      if (!hi || compare(mag_lo.value, hi->value) < 0 ||
          (compare(mag_lo.value, hi->value) == 0 && !mag_lo.strict && !hi->strict))
        for (Sequence& m : magnitudes(mag_lo, hi)) alts.push_back(std::move(m));
    }
    if (alts.empty()) fail("no number lies between the minimum and the maximum");
    return b_.rule(name("bounded_number"), std::move(alts));
  }

  int number_schema(const json& s) {
    for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
      if (s.contains(key) && !(s[key].is_boolean() && (std::string(key).starts_with("exclusive")))) return bounded_number(s);
    return number();
  }

  int object_schema(const json& s, int depth) {
    json properties = s.contains("properties") ? s["properties"] : json::object();
    if (!properties.is_object()) fail("'properties' must be an object");
    const json additional = s.contains("additionalProperties") ? s["additionalProperties"] : json(true);
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail("'required' must be an array of strings");
      // (a set of the keys, and members appended directly: an ordered_json finds and inserts keys by linear search)
      std::set<std::string> named;
      for (const auto& [key, v] : properties.items()) named.insert(key);
      auto& members = static_cast<json::object_t::Container&>(properties.get_ref<json::object_t&>());
      for (const json& r : s["required"]) {
        if (!r.is_string()) fail("'required' must be an array of strings");
        const std::string key = r.get<std::string>();
        required.insert(key);
        if (!named.insert(key).second) continue;
        // A required key the properties do not name is an additional property: allowed as additionalProperties says.
        if (additional.is_boolean() && !additional.get<bool>())
          fail(fmt::format("the required property '{}' is not in 'properties' and 'additionalProperties' is false", key));
        members.emplace_back(key, additional);
      }
    }
    if (properties.empty()) {
      if (additional.is_boolean() && !additional.get<bool>())
        return b_.rule(name("empty_object"), {{ch('{'), ref(ws()), ch('}')}});
      return map_of(additional.is_boolean() ? value_any() : compile(additional, depth + 1), name("map"));
    }
    // first_i: the members from i on, none written yet; rest_i: the same after one was (each needs a comma).
    // Properties come in the order the client wrote them.
    // (by position, not by key: finding a key in an ordered_json is a linear search)
    std::vector<std::pair<std::string, const json*>> order;
    for (const auto& [key, v] : properties.items()) order.emplace_back(key, &v);
    const size_t n = order.size();
    int first = b_.rule(name("members_end"), {{}}), rest = first;
    for (size_t k = n; k-- > 0;) {
      const std::string& key = order[k].first;
      const Sequence member = cat(b_.literal(json(key).dump()),
                                  {ref(ws()), ch(':'), ref(ws()), ref(compile(*order[k].second, depth + 1)), ref(ws())});
      const bool optional = required.count(key) == 0;
      std::vector<Sequence> rest_alts{cat(cat({ch(','), ref(ws())}, member), {ref(rest)})};
      if (optional) rest_alts.push_back({ref(rest)});
      std::vector<Sequence> first_alts{cat(member, {ref(rest)})};
      if (optional) first_alts.push_back({ref(first)});
      const int new_rest = b_.rule(name("members_rest"), std::move(rest_alts));
      first = b_.rule(name("members"), std::move(first_alts));
      rest = new_rest;
    }
    return b_.rule(name("object"), {{ch('{'), ref(ws()), ref(first), ch('}')}});
  }

  int array_schema(const json& s, int depth) {
    const std::optional<int64_t> min_items = count(s, "minItems"), max_items = count(s, "maxItems");
    const int64_t min = min_items.value_or(0);
    int64_t max = max_items ? *max_items : -1;
    if (max >= 0 && max < min) fail("'maxItems' is below 'minItems'");
    if (s.contains("uniqueItems") && !(s["uniqueItems"].is_boolean() && !s["uniqueItems"].get<bool>()))
      fail("'uniqueItems' is not supported");
    const json items = s.contains("items") ? s["items"] : json(true);
    const bool more_allowed = !(items.is_boolean() && !items.get<bool>());
    if (!s.contains("prefixItems")) {
      if (!more_allowed) max = 0;
      if (max == 0 && min > 0) fail("'minItems' above what 'items' allows");
      return list_of(more_allowed ? compile(items, depth + 1) : value_any(), min, max, name("list"));
    }
    const json& prefix = s["prefixItems"];
    if (!prefix.is_array()) fail("'prefixItems' must be an array");
    const auto k = static_cast<int64_t>(prefix.size());
    if (!more_allowed) max = max < 0 ? k : std::min(max, k);
    if (min > (more_allowed ? (max < 0 ? INT64_MAX : max) : k)) fail("'minItems' above what the items allow");
    // After the prefix: more items, each after a comma.
    int next = more_allowed && (max < 0 || max > k)
                   ? b_.repeat(name("tail"), {ch(','), ref(ws()), ref(compile(items, depth + 1)), ref(ws())},
                               static_cast<int>(std::max<int64_t>(min - k, 0)), max < 0 ? -1 : static_cast<int>(max - k))
                   : b_.rule(name("tail"), {{}});
    for (int64_t i = std::min(k, max < 0 ? k : max); i-- > 0;) {
      Sequence item{ref(compile(prefix[static_cast<size_t>(i)], depth + 1)), ref(ws()), ref(next)};
      if (i > 0) item = cat({ch(','), ref(ws())}, item);
      std::vector<Sequence> alts{item};
      if (i >= min) alts.push_back({});
      next = b_.rule(name("prefix"), std::move(alts));
    }
    return b_.rule(name("tuple"), {{ch('['), ref(ws()), ref(next), ch(']')}});
  }

};

}  // namespace

Grammar json_schema_grammar(const nlohmann::ordered_json& schema) {
  SchemaCompiler compiler(schema);
  return compiler.build_root(&schema);
}

Grammar json_object_grammar() {
  const json none;
  SchemaCompiler compiler(none);
  return compiler.build_root(nullptr);
}

}  // namespace pagoda::structured
