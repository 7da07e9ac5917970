// Output-constraint request fields (output_constraint_fields.h).
#include "pagoda/server/output_constraint_fields.h"

#include <fmt/format.h>

#include "pagoda/server/api_error.h"
#include "pagoda/server/json_text.h"
#include "pagoda/server/openai_request.h"

namespace pagoda::server {
namespace {

using json = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& field, const std::string& expected) {
  throw ApiError(400, fmt::format("'{}' must be {}", field, expected), field);
}

bool given(const json& o, const char* key) { return o.contains(key) && !o[key].is_null(); }

// A JSON schema given as an object, or as its JSON text (vLLM takes both for guided_json).
std::string schema_text(const json& v, const std::string& field) {
  if (v.is_object() || v.is_boolean()) return v.dump();
  if (v.is_string()) {
    json parsed;
    try {  // (a JSON text inside the body: bounded as deep as a body by default, before anything recurses over it)
      parsed = parse_ordered_json(v.get_ref<const std::string&>(), RequestLimits{}.max_json_depth);
    } catch (const JsonTooDeep& e) {
      bad(field, fmt::format("a JSON schema nested at most {} levels deep", e.max_depth));
    } catch (const json::exception&) {
      bad(field, "a JSON schema (an object)");
    }
    if (!(parsed.is_object() || parsed.is_boolean())) bad(field, "a JSON schema (an object)");
    return parsed.dump();
  }
  bad(field, "a JSON schema (an object)");
}

OutputConstraint regex(const json& v, const std::string& field) {
  if (!v.is_string()) bad(field, "a regular expression (a string)");
  return {OutputConstraint::Kind::kRegex, v.get<std::string>(), {}, field};
}

OutputConstraint choice(const json& v, const std::string& field) {
  if (!v.is_array() || v.empty()) bad(field, "a non-empty list of strings");
  OutputConstraint c{OutputConstraint::Kind::kChoice, "", {}, field};
  for (const json& e : v) {
    if (!e.is_string()) bad(field, "a non-empty list of strings");
    c.choices.push_back(e.get<std::string>());
  }
  return c;
}

OutputConstraint response_format(const json& v) {
  if (!v.is_object() || !v.contains("type") || !v["type"].is_string())
    bad("response_format", "an object with a 'type' ('text', 'json_object' or 'json_schema')");
  const std::string type = v["type"].get<std::string>();
  if (type == "text") return {};
  if (type == "json_object") return {OutputConstraint::Kind::kJsonObject, "", {}, "response_format"};
  if (type != "json_schema") bad("response_format.type", "'text', 'json_object' or 'json_schema'");
  if (!given(v, "json_schema") || !v["json_schema"].is_object())
    bad("response_format.json_schema", "an object with a 'schema'");
  const json& js = v["json_schema"];
  if (!given(js, "schema")) bad("response_format.json_schema.schema", "a JSON schema");
  return {OutputConstraint::Kind::kJsonSchema, schema_text(js["schema"], "response_format.json_schema.schema"), {},
          "response_format"};
}

OutputConstraint structured_outputs(const json& v) {
  if (!v.is_object()) bad("structured_outputs", "an object");
  OutputConstraint c;
  int count = 0;
  for (const auto& [key, value] : v.items()) {
    if (value.is_null()) continue;
    const std::string field = "structured_outputs." + key;
    if (key == "json") {
      c = {OutputConstraint::Kind::kJsonSchema, schema_text(value, field), {}, field};
    } else if (key == "json_object") {
      if (!value.is_boolean()) bad(field, "true or false");
      if (!value.get<bool>()) continue;
      c = {OutputConstraint::Kind::kJsonObject, "", {}, field};
    } else if (key == "regex") {
      c = regex(value, field);
    } else if (key == "choice") {
      c = choice(value, field);
    } else if (key == "grammar" || key == "structural_tag") {
      throw ApiError(400, fmt::format("'{}' is not supported; use json, regex or choice", field), field);
    } else if (key == "disable_any_whitespace" || key == "disable_fallback" || key == "disable_additional_properties" ||
               key == "whitespace_pattern") {
      continue;  // options of vLLM's backends; Pagoda's whitespace is always bounded (docs/API.md)
    } else {
      throw ApiError(400, fmt::format("'{}' is not a structured-output field", field), field);
    }
    ++count;
  }
  if (count > 1) throw ApiError(400, "'structured_outputs' may set only one of json, json_object, regex, choice", "structured_outputs");
  return c;
}

}  // namespace

OutputConstraint parse_output_constraint(const json& o) {
  std::vector<OutputConstraint> found;
  if (given(o, "response_format")) {
    OutputConstraint c = response_format(o["response_format"]);
    if (c.kind != OutputConstraint::Kind::kNone) found.push_back(std::move(c));
  }
  if (given(o, "guided_json")) found.push_back({OutputConstraint::Kind::kJsonSchema, schema_text(o["guided_json"], "guided_json"), {}, "guided_json"});
  if (given(o, "guided_regex")) found.push_back(regex(o["guided_regex"], "guided_regex"));
  if (given(o, "guided_choice")) found.push_back(choice(o["guided_choice"], "guided_choice"));
  if (given(o, "structured_outputs")) {
    OutputConstraint c = structured_outputs(o["structured_outputs"]);
    if (c.kind != OutputConstraint::Kind::kNone) found.push_back(std::move(c));
  }
  for (const char* unsupported : {"guided_grammar", "guided_whitespace_pattern"})
    if (given(o, unsupported))
      throw ApiError(400, fmt::format("'{}' is not supported; use guided_json, guided_regex or guided_choice", unsupported),
                     unsupported);
  if (found.size() > 1)
    throw ApiError(400, fmt::format("'{}' and '{}' both constrain the output; give one", found[0].field, found[1].field),
                   found[1].field);
  return found.empty() ? OutputConstraint{} : std::move(found[0]);
}

}  // namespace pagoda::server
