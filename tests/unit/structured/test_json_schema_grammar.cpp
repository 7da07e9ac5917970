// JSON schemas as grammars. Two checks per schema: documents written by hand are accepted, or refused when
// invalid or outside what the grammar produces (properties out of order, extra keys), and documents drawn at random from the grammar (a walk over single characters) all
// parse and validate, by a small validator written from the specification for the keywords supported.
// Integer ranges are checked against plain comparisons over every integer near the bounds.
#include "pagoda/structured/json_schema_grammar.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <fmt/format.h>
#include <regex>

#include "pagoda/core/error.h"
#include "pagoda/structured/constraint.h"

namespace pagoda::structured {
namespace {

using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

// The vocabulary of a random walk: every printable ASCII character, a newline, a two-byte character, and
// a few longer tokens.
std::shared_ptr<const VocabIndex> char_vocab() {
  std::vector<std::string> tokens;
  for (char ch = 0x20; ch < 0x7F; ++ch) tokens.emplace_back(1, ch);
  for (const char* t : {"\n", "é", "\"name\"", "true", "\": ", "12"}) tokens.emplace_back(t);
  const int n = static_cast<int>(tokens.size());
  return std::make_shared<const VocabIndex>(std::move(tokens), n + 1, std::vector<TokenId>{n});
}

bool accepts(const std::shared_ptr<const CompiledConstraint>& c, const std::string& doc) {
  ConstraintMatcher m(c);
  return m.accept_bytes(doc) && m.complete();
}

// JSON Schema's rules for the supported keywords, written independently of the grammar compiler.
bool valid(const json& v, const json& s, const json& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) {
    const std::string r = s["$ref"];
    return valid(v, r == "#" ? root : root.at(json::json_pointer(r.substr(1))), root);
  }
  if (s.contains("const") && v != s["const"]) return false;
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) return false;
  for (const char* key : {"anyOf", "oneOf"})
    if (s.contains(key) && std::none_of(s[key].begin(), s[key].end(), [&](const json& sub) { return valid(v, sub, root); }))
      return false;
  if (s.contains("allOf") && !std::all_of(s["allOf"].begin(), s["allOf"].end(), [&](const json& sub) { return valid(v, sub, root); }))
    return false;
  if (s.contains("type")) {
    const json types = s["type"].is_array() ? s["type"] : json::array({s["type"]});
    const bool ok = std::any_of(types.begin(), types.end(), [&](const json& t) {
      return (t == "string" && v.is_string()) || (t == "boolean" && v.is_boolean()) || (t == "null" && v.is_null()) ||
             (t == "object" && v.is_object()) || (t == "array" && v.is_array()) ||
             (t == "number" && v.is_number()) ||
             // "integer": a number with no fractional part (nlohmann reads 10^22 as a double)
             (t == "integer" && v.is_number() && std::floor(v.get<double>()) == v.get<double>());
    });
    if (!ok) return false;
  }
  if (v.is_string()) {
    const std::string& str = v.get_ref<const std::string&>();
    size_t chars = 0;
    for (unsigned char ch : str) chars += (ch & 0xC0) != 0x80;
    if (s.contains("minLength") && chars < s["minLength"].get<size_t>()) return false;
    if (s.contains("maxLength") && chars > s["maxLength"].get<size_t>()) return false;
    if (s.contains("pattern") && !std::regex_search(str, std::regex(s["pattern"].get<std::string>()))) return false;
  }
  if (v.is_number()) {
    const double d = v.get<double>();
    if (s.contains("minimum") && d < s["minimum"].get<double>()) return false;
    if (s.contains("maximum") && d > s["maximum"].get<double>()) return false;
    if (s.contains("exclusiveMinimum") && d <= s["exclusiveMinimum"].get<double>()) return false;
    if (s.contains("exclusiveMaximum") && d >= s["exclusiveMaximum"].get<double>()) return false;
  }
  if (v.is_object()) {
    if (s.contains("required"))
      for (const json& r : s["required"])
        if (!v.contains(r.get<std::string>())) return false;
    const json props = s.value("properties", json::object());
    for (const auto& [key, value] : v.items()) {
      if (props.contains(key)) {
        if (!valid(value, props[key], root)) return false;
      } else if (s.contains("additionalProperties") && !valid(value, s["additionalProperties"], root)) {
        return false;
      }
    }
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    const size_t prefix = s.contains("prefixItems") ? s["prefixItems"].size() : 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const json& sub = i < prefix ? s["prefixItems"][i] : s.value("items", json(true));
      if (!valid(v[i], sub, root)) return false;
    }
  }
  return true;
}

// Random documents of the grammar: each step picks uniformly among the allowed characters (the end token
// once complete); walks longer than `max_steps` are dropped.
std::vector<std::string> random_documents(const std::shared_ptr<const CompiledConstraint>& c, int count, uint32_t seed,
                                          int max_steps = 3000) {
  std::mt19937 rng(seed);
  const VocabIndex& v = *c->vocab;
  std::vector<std::string> docs;
  for (int attempt = 0; attempt < count * 4 && static_cast<int>(docs.size()) < count; ++attempt) {
    ConstraintMatcher m(c);
    std::string doc;
    for (int step = 0; step < max_steps; ++step) {
      const std::vector<uint64_t>& bits = m.allowed_tokens();
      std::vector<TokenId> allowed;
      for (TokenId id = 0; id < v.num_logits(); ++id)
        if ((bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1) allowed.push_back(id);
      EXPECT_FALSE(allowed.empty());
      const TokenId pick = allowed[rng() % allowed.size()];
      EXPECT_TRUE(m.accept(pick));
      if (pick == v.end_ids()[0]) {
        EXPECT_TRUE(m.complete()) << "ended early: " << doc;
        docs.push_back(doc);
        break;
      }
      doc += v.bytes(pick);
    }
  }
  return docs;
}

struct SchemaCase {
  const char* schema;
  std::vector<const char*> good, bad;
};

const std::vector<SchemaCase>& cases() {
  static const std::vector<SchemaCase> all = {
      {R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]})",
       {R"({"name": "x"})", R"({"name": "x", "age": 3})", R"({ "name" : "a\"b" , "age" :-12 })", "{\n  \"name\": \"x\"\n}", R"({"name":"é\u00e9"})"},
       {R"({"age": 3})", R"({"name": 1})", R"({"name":  "x"})", "{\n\n\"name\": \"x\"}", R"({"age": 3, "name": "x"})", R"({"name": "x", "other": 1})", R"({"name": "x",})",
        R"({"name": "\ud800"})"}},
      {R"({"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 3})",
       {"[1]", "[1.5, -2e3, 0]", "[ 0.25 ,1E+2 ]"},
       {"[]", "[1,2,3,4]", "[01]", "[1.]", "[.5]", "[\"1\"]"}},
      {R"({"enum": ["red", "green", 3, null, {"a": [1]}]})", {"\"red\"", "3", "null", "{\"a\":[1]}"}, {"\"blue\"", "4", "{\"a\": [1]}"}},
      {R"({"type": "string", "pattern": "^[a-z]+-\\d{2}$"})", {"\"ab-12\""}, {"\"ab-1\"", "\"Ab-12\"", "\"ab-123\""}},
      {R"({"type": "string", "pattern": "\\d"})", {"\"x1y\"", "\"7\""}, {"\"xy\""}},
      {R"({"type": "string", "minLength": 2, "maxLength": 3})", {"\"ab\"", "\"a\\nb\"", "\"ééé\""}, {"\"a\"", "\"abcd\""}},
      {R"({"anyOf": [{"type": "integer"}, {"type": "string"}], "description": "id"})", {"1", "\"1\""}, {"1.5", "true"}},
      {R"({"type": ["boolean", "null"]})", {"true", "null"}, {"0", "\"true\""}},
      {R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"]}}, "$ref": "#/$defs/node"})",
       {R"({"v": 1, "next": {"v": 2, "next": null}})"}, {R"({"v": 1})", R"({"v": 1, "next": {"v": 2}})"}},
      {R"({"type": "object", "additionalProperties": {"type": "integer"}})", {"{}", R"({"a": 1, "b": 2})"}, {R"({"a": "x"})"}},
      {R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false})",
       {"[]", "[\"a\"]", "[\"a\", 1]"}, {"[1]", "[\"a\", 1, 2]"}},
      {R"({"type": "number", "minimum": 0})", {"0", "1.5", "0.03"}, {"-1", "-0.5", "3e-2"}},
      {R"({"type": "object"})", {"{}", R"({"a": [1, {"b": null}], "c": "d"})"}, {"[]", "1"}},
      {R"({"type": "object", "properties": {"a": {"const": 1}, "b": {"const": 2}, "c": {"const": 3}}})",
       {"{}", R"({"a": 1})", R"({"b": 2, "c": 3})", R"({"a": 1, "c": 3})"}, {R"({"b": 2, "a": 1})", R"({, "b": 2})"}},
      // A required key the properties do not name takes additionalProperties' schema.
      {R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["b"], "additionalProperties": {"type": "string"}})",
       {R"({"b": "x"})", R"({"a": 1, "b": "x"})"}, {R"({"b": 1})", R"({"a": 1})", "{}"}},
      // An alternative no finite value satisfies (an object whose required "a" refers to itself forever) is
      // dropped: the walks never start an object they could not finish.
      {R"({"anyOf": [{"type": "object", "properties": {"a": {"$ref": "#/$defs/loop"}}, "required": ["a"]}, {"type": "integer"}],
          "$defs": {"loop": {"$ref": "#/$defs/loop"}}})",
       {"1", "-3"}, {"{}", R"({"a": 1})"}},
  };
  return all;
}

TEST(JsonSchemaGrammar, HandWrittenDocuments) {
  const auto vocab = char_vocab();
  for (const SchemaCase& sc : cases()) {
    SCOPED_TRACE(sc.schema);
    const auto c = compile_constraint(json_schema_grammar(ojson::parse(sc.schema)), vocab, "json_schema");
    for (const char* doc : sc.good) EXPECT_TRUE(accepts(c, doc)) << doc;
    for (const char* doc : sc.bad) EXPECT_FALSE(accepts(c, doc)) << doc;
  }
}

TEST(JsonSchemaGrammar, RandomDocumentsParseAndValidate) {
  const auto vocab = char_vocab();
  uint32_t seed = 1;
  for (const SchemaCase& sc : cases()) {
    SCOPED_TRACE(sc.schema);
    const json schema = json::parse(sc.schema);
    const auto c = compile_constraint(json_schema_grammar(ojson::parse(sc.schema)), vocab, "json_schema");
    const std::vector<std::string> docs = random_documents(c, 8, seed++);
    EXPECT_GE(docs.size(), 4u) << "too few walks ended: the check would prove little";
    for (const std::string& doc : docs) {
      json v;
      ASSERT_NO_THROW(v = json::parse(doc)) << doc;
      EXPECT_TRUE(valid(v, schema, schema)) << "[" << doc << "]";
    }
  }
}

TEST(JsonSchemaGrammar, JsonObjectModeTakesAnyObjectOnly) {
  const auto c = compile_constraint(json_object_grammar(), char_vocab(), "json_object");
  EXPECT_TRUE(accepts(c, R"({"a": [1, 2.5e-3, "x", true, null, {}]})"));
  EXPECT_TRUE(accepts(c, "\n{ }"));
  EXPECT_FALSE(accepts(c, "[1]"));
  EXPECT_FALSE(accepts(c, R"({"a": tru})"));
  for (const std::string& doc : random_documents(c, 8, 99)) {
    json v;
    ASSERT_NO_THROW(v = json::parse(doc)) << doc;
    EXPECT_TRUE(v.is_object());
  }
}

TEST(JsonSchemaGrammar, IntegerRangesMatchComparisons) {
  struct Range {
    const char* schema;
    int64_t lo, hi;
  };
  const int64_t inf = INT64_MAX;
  for (const Range& r : std::vector<Range>{{R"({"type": "integer", "minimum": -5, "maximum": 17})", -5, 17},
                                           {R"({"type": "integer", "minimum": 0})", 0, inf},
                                           {R"({"type": "integer", "minimum": 10, "maximum": 99})", 10, 99},
                                           {R"({"type": "integer", "minimum": 1, "maximum": 1000})", 1, 1000},
                                           {R"({"type": "integer", "maximum": -3})", -inf, -3},
                                           {R"({"type": "integer", "exclusiveMinimum": 6, "exclusiveMaximum": 8})", 7, 7},
                                           {R"({"type": "integer", "minimum": 95, "maximum": 205})", 95, 205},
                                           {R"({"type": "integer", "minimum": -150, "maximum": -20})", -150, -20}}) {
    SCOPED_TRACE(r.schema);
    const auto c = compile_constraint(json_schema_grammar(ojson::parse(r.schema)), char_vocab(), "json_schema");
    for (int64_t i = -1200; i <= 1200; ++i) EXPECT_EQ(accepts(c, std::to_string(i)), i >= r.lo && i <= r.hi) << i;
    EXPECT_FALSE(accepts(c, "007"));
    EXPECT_FALSE(accepts(c, "-0"));
  }
}

TEST(JsonSchemaGrammar, NumberRangesMatchComparisons) {
  struct Range {
    const char* schema;
    double lo, hi;
    bool lo_strict, hi_strict;
  };
  const double inf = INFINITY;
  const std::vector<Range> ranges = {
      {R"({"type": "number", "minimum": 0, "maximum": 1})", 0, 1, false, false},
      {R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})", 0, 1, true, true},
      {R"({"type": "number", "minimum": -1.5, "maximum": 2.25})", -1.5, 2.25, false, false},
      {R"({"type": "number", "exclusiveMinimum": -0.5, "maximum": 0})", -0.5, 0, true, false},
      {R"({"type": "number", "minimum": 0.1, "maximum": 0.2})", 0.1, 0.2, false, false},
      {R"({"type": "number", "minimum": 2.5})", 2.5, inf, false, false},
      {R"({"type": "number", "exclusiveMaximum": -1})", -inf, -1, false, true},
      {R"({"type": "number", "minimum": 3, "maximum": 3})", 3, 3, false, false},
      {R"({"type": "number", "minimum": -12.75, "exclusiveMaximum": -12.5})", -12.75, -12.5, false, true},
      {R"({"type": "number", "minimum": 0, "exclusiveMinimum": 0})", 0, inf, true, false},  // the tighter wins
      {R"({"type": "number", "minimum": 1e-2, "maximum": 15})", 0.01, 15, false, false},
  };
  for (const Range& r : ranges) {
    SCOPED_TRACE(r.schema);
    const auto c = compile_constraint(json_schema_grammar(ojson::parse(r.schema)), char_vocab(), "json_schema");
    // Every multiple of 0.005 in [-20, 20], written with 3 decimals, with 1 or 2 when exact, and without a
    // fraction when whole: accepted exactly when inside (compared in thousandths, exactly).
    for (int k = -4000; k <= 4000; ++k) {
      const int64_t milli = k * 5;
      const auto inside = [&](int64_t m) {
        const double lo_m = r.lo * 1000, hi_m = r.hi * 1000;
        return (r.lo_strict ? m > lo_m : m >= lo_m) && (r.hi_strict ? m < hi_m : m <= hi_m);
      };
      std::vector<std::string> forms{fmt::format("{}{}.{:03d}", milli < 0 ? "-" : "", std::abs(milli) / 1000, std::abs(milli) % 1000)};
      if (milli % 10 == 0) forms.push_back(fmt::format("{}{}.{:02d}", milli < 0 ? "-" : "", std::abs(milli) / 1000, std::abs(milli) % 1000 / 10));
      if (milli % 1000 == 0) forms.push_back(fmt::format("{}", milli / 1000));
      for (const std::string& text : forms) {
        if (text == "-0" || text.starts_with("-0.000")) continue;  // negative zero is written "0"
        EXPECT_EQ(accepts(c, text), inside(milli)) << text;
      }
    }
    EXPECT_FALSE(accepts(c, "1e0"));  // bounded numbers are plain decimals
    EXPECT_FALSE(accepts(c, "-0"));
  }
  EXPECT_THROW(json_schema_grammar(ojson::parse(R"({"type": "number", "minimum": 2, "exclusiveMaximum": 2})")), InvalidRequest);
}

TEST(JsonSchemaGrammar, RefusesWhatItCannotEnforce) {
  for (const char* schema : {R"({"type": "string", "not": {"const": "a"}})", R"({"type": "array", "uniqueItems": true})",
                             R"({"type": "object", "patternProperties": {"^a": {}}})",
                             R"({"type": "number", "multipleOf": 2})", R"({"$ref": "https://example.com/s.json"})",
                             R"({"$ref": "#/$defs/missing"})", R"({"type": "strng"})", "false", R"({"enum": []})",
                             R"({"type": "array", "minItems": 5, "maxItems": 2})", R"({"type": "integer", "minimum": 5, "maximum": 2})",
                             R"({"type": "string", "maxLength": 100000})",
                             // no finite value satisfies these
                             R"({"$ref": "#"})", R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})",
                             R"({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]})",
                             R"({"type": "array", "items": {"$ref": "#"}, "minItems": 1})",
                             R"({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"], "additionalProperties": false})"}) {
    SCOPED_TRACE(schema);
    EXPECT_THROW(json_schema_grammar(ojson::parse(schema)), InvalidRequest);
  }
}

TEST(JsonSchemaGrammar, APrefixIsAcceptedOnlyWhenAValueCanFollow) {
  // Recursion with a way out stays (a tree of arrays), and so does its every prefix; a branch with none is refused
  // at its first character.
  const auto vocab = char_vocab();
  const auto tree = compile_constraint(json_schema_grammar(ojson::parse(R"({"type": "array", "items": {"$ref": "#"}})")),
                                       vocab, "json_schema");
  EXPECT_TRUE(accepts(tree, "[[], [[]]]"));
  const auto stuck = compile_constraint(
      json_schema_grammar(ojson::parse(R"({"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/loop"}, "minItems": 1},
                                                      {"type": "boolean"}], "$defs": {"loop": {"$ref": "#/$defs/loop"}}})")),
      vocab, "json_schema");
  ConstraintMatcher m(stuck);
  EXPECT_FALSE(m.accept_bytes("["));
  EXPECT_TRUE(accepts(stuck, "true"));
}

TEST(JsonSchemaGrammar, AnnotationsAndExtensionsAreSkipped) {
  const ojson schema = ojson::parse(R"({"title": "T", "description": "d", "x-vendor": 1, "type": "string", "format": "email",
                                         "examples": ["a"], "default": "b", "$schema": "https://json-schema.org/draft/2020-12/schema"})");
  const auto c = compile_constraint(json_schema_grammar(schema), char_vocab(), "json_schema");
  EXPECT_TRUE(accepts(c, "\"anything\""));
}

}  // namespace
}  // namespace pagoda::structured
