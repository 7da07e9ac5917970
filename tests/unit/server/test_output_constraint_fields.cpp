// The request fields that constrain an output: each spelling maps to one OutputConstraint, schemas keep
// the client's key order, and malformed or conflicting fields are a 400 naming the field.
#include "pagoda/server/output_constraint_fields.h"

#include <gtest/gtest.h>

#include "pagoda/server/api_error.h"

namespace pagoda::server {
namespace {

using json = nlohmann::ordered_json;
using Kind = OutputConstraint::Kind;

OutputConstraint parse(const char* body) { return parse_output_constraint(json::parse(body)); }

std::string refused_param(const char* body) {
  try {
    parse(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param();
  }
  return "(accepted)";
}

TEST(OutputConstraintFields, EachSpelling) {
  EXPECT_EQ(parse(R"({})").kind, Kind::kNone);
  EXPECT_EQ(parse(R"({"response_format": {"type": "text"}})").kind, Kind::kNone);
  EXPECT_EQ(parse(R"({"response_format": {"type": "json_object"}})").kind, Kind::kJsonObject);
  const OutputConstraint s =
      parse(R"({"response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object", "properties": {"b": {}, "a": {}}}}}})");
  EXPECT_EQ(s.kind, Kind::kJsonSchema);
  EXPECT_EQ(s.spec, R"({"type":"object","properties":{"b":{},"a":{}}})") << "key order kept";
  EXPECT_EQ(s.field, "response_format");
  const OutputConstraint text_schema = parse(R"({"guided_json": "{\"type\": \"integer\"}"})");
  EXPECT_EQ(text_schema.kind, Kind::kJsonSchema);
  EXPECT_EQ(text_schema.spec, R"({"type":"integer"})");
  EXPECT_EQ(parse(R"({"guided_regex": "a+"})").spec, "a+");
  EXPECT_EQ(parse(R"({"guided_choice": ["x", "y"]})").choices, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(parse(R"({"structured_outputs": {"regex": "b"}})").kind, Kind::kRegex);
  EXPECT_EQ(parse(R"({"structured_outputs": {"json": {"type": "string"}, "disable_any_whitespace": true}})").kind, Kind::kJsonSchema);
  EXPECT_EQ(parse(R"({"guided_json": null, "guided_regex": "c"})").kind, Kind::kRegex) << "null means absent";
}

TEST(OutputConstraintFields, RefusalsNameTheField) {
  EXPECT_EQ(refused_param(R"({"response_format": "json"})"), "response_format");
  EXPECT_EQ(refused_param(R"({"response_format": {"type": "xml"}})"), "response_format.type");
  EXPECT_EQ(refused_param(R"({"response_format": {"type": "json_schema", "json_schema": {"name": "n"}}})"),
            "response_format.json_schema.schema");
  EXPECT_EQ(refused_param(R"({"guided_json": "{not json"})"), "guided_json");
  EXPECT_EQ(refused_param(R"({"guided_regex": 5})"), "guided_regex");
  EXPECT_EQ(refused_param(R"({"guided_choice": ["a", 1]})"), "guided_choice");
  EXPECT_EQ(refused_param(R"({"guided_grammar": "root ::= x"})"), "guided_grammar");
  EXPECT_EQ(refused_param(R"({"structured_outputs": {"grammar": "g"}})"), "structured_outputs.grammar");
  EXPECT_EQ(refused_param(R"({"structured_outputs": {"regex": "a", "choice": ["b"]}})"), "structured_outputs");
  EXPECT_EQ(refused_param(R"({"response_format": {"type": "json_object"}, "guided_regex": "a"})"), "guided_regex");
}

}  // namespace
}  // namespace pagoda::server
