// tools / tool_choice validation and what follows from them (tool_request.h).
#include "pagoda/server/tool_request.h"

#include <fmt/format.h>

#include "pagoda/server/api_error.h"

namespace pagoda::server {
namespace {

using json = nlohmann::ordered_json;

constexpr const char* kNamedChoiceUsage = R"(Correct usage: `{"type": "function", "function": {"name": "my_function"}}`)";

bool present(const json& o, const char* field) { return o.contains(field) && !o[field].is_null(); }

[[noreturn]] void bad(const std::string& field, const std::string& message) { throw ApiError(400, message, field); }

void check_tool(const json& tool, size_t i) {
  const std::string field = fmt::format("tools[{}]", i);
  if (!tool.is_object()) bad(field, fmt::format("'{}' must be an object {{\"type\": \"function\", \"function\": {{...}}}}", field));
  if (present(tool, "type") && tool["type"] != "function")
    bad(field + ".type", fmt::format("'{}.type' must be \"function\" (the only tool type)", field));
  if (!present(tool, "function") || !tool["function"].is_object())
    bad(field + ".function", fmt::format("'{}.function' must be an object with a 'name'", field));
  const json& fn = tool["function"];
  if (!present(fn, "name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty())
    bad(field + ".function.name", fmt::format("'{}.function.name' must be a non-empty string", field));
  if (present(fn, "description") && !fn["description"].is_string())
    bad(field + ".function.description", fmt::format("'{}.function.description' must be a string", field));
  if (present(fn, "parameters") && !fn["parameters"].is_object())
    bad(field + ".function.parameters", fmt::format("'{}.function.parameters' must be a JSON schema object", field));
}

const json* find_function(const json& tools, const std::string& name) {
  for (const json& t : tools)
    if (t["function"]["name"] == name) return &t["function"];
  return nullptr;
}

// A function's parameters schema; a function without one takes an empty object (vLLM's default).
json parameters_of(const json& function) {
  if (present(function, "parameters")) return function["parameters"];
  return json{{"type", "object"}, {"properties", json::object()}};
}

}  // namespace

ToolRequest parse_tool_request(const json& body) {
  ToolRequest r;
  if (present(body, "tools")) {
    if (!body["tools"].is_array()) bad("tools", "'tools' must be a list of {\"type\": \"function\", \"function\": {...}}");
    for (size_t i = 0; i < body["tools"].size(); ++i) check_tool(body["tools"][i], i);
    r.tools = body["tools"];
  }
  if (!present(body, "tool_choice")) {
    r.choice = r.tools.empty() ? ToolRequest::Choice::kNone : ToolRequest::Choice::kAuto;
    return r;
  }
  const json& choice = body["tool_choice"];
  if (choice == "none") return r;  // needs no tools
  if (!present(body, "tools")) bad("tool_choice", "When using `tool_choice`, `tools` must be set.");
  if (choice.is_string()) {
    if (choice == "auto") {
      r.choice = ToolRequest::Choice::kAuto;
    } else if (choice == "required") {
      // With nothing to call, "required" is "none" (vLLM follows OpenAI here).
      r.choice = r.tools.empty() ? ToolRequest::Choice::kNone : ToolRequest::Choice::kRequired;
    } else {
      bad("tool_choice", fmt::format("Invalid value for `tool_choice`: {}! Only named tools, \"none\", \"auto\" or "
                                     "\"required\" are supported.", choice.get<std::string>()));
    }
    return r;
  }
  if (!choice.is_object())
    bad("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  if (present(choice, "type") && choice["type"] != "function")
    bad("tool_choice", fmt::format("Invalid value for `type` in `tool_choice`! {}", kNamedChoiceUsage));
  if (!present(choice, "function") || !choice["function"].is_object())
    bad("tool_choice", fmt::format("Invalid value for `function` in `tool_choice`! {}", kNamedChoiceUsage));
  const json& fn = choice["function"];
  if (!present(fn, "name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty())
    bad("tool_choice", fmt::format("Expected a non-empty string `name` in `function` in `tool_choice`! {}", kNamedChoiceUsage));
  r.function = fn["name"].get<std::string>();
  if (find_function(r.tools, r.function) == nullptr)
    bad("tool_choice", "The tool specified in `tool_choice` does not match any of the specified `tools`");
  r.choice = ToolRequest::Choice::kFunction;
  return r;
}

std::string forced_tool_schema(const ToolRequest& request) {
  if (request.choice == ToolRequest::Choice::kFunction) return parameters_of(*find_function(request.tools, request.function)).dump();
  if (request.choice != ToolRequest::Choice::kRequired) return "";
  // An array of calls, each {"name": one tool's name, "parameters": that tool's schema}; the tools' $defs move
  // to the top, where their "$ref"s ("#/$defs/...") resolve.
  json any_of = json::array();
  json defs = json::object();
  for (const json& tool : request.tools) {
    json params = parameters_of(tool["function"]);
    if (params.contains("$defs") && params["$defs"].is_object()) {
      for (const auto& [name, schema] : params["$defs"].items()) {
        if (defs.contains(name) && defs[name] != schema)
          bad("tools", fmt::format("Tool definition '{}' has multiple schemas, which is not supported.", name));
        defs[name] = schema;
      }
      params.erase("$defs");
    }
    any_of.push_back({{"type", "object"},
                      {"properties", {{"name", {{"type", "string"}, {"enum", json::array({tool["function"]["name"]})}}},
                                      {"parameters", std::move(params)}}},
                      {"required", json::array({"name", "parameters"})}});
  }
  // vLLM writes {"type": "object", "anyOf": [...]} for the items; the same schema with the type inside each
  // branch is what structured/ compiles (it takes anyOf only alone).
  json schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", std::move(any_of)}}}};
  if (!defs.empty()) schema["$defs"] = std::move(defs);
  return schema.dump();
}

json template_tools(const ToolRequest& request, const ToolServingOptions& options) {
  if (request.tools.empty()) return nullptr;
  if (request.choice == ToolRequest::Choice::kNone && options.exclude_tools_when_tool_choice_none) return nullptr;
  return request.tools;
}

void check_tool_choice_served(const ToolRequest& request, const ToolServingOptions& options) {
  if (request.choice == ToolRequest::Choice::kAuto && !(options.enable_auto_tool_choice && !options.parser.empty()))
    bad("tool_choice", "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set");
}

std::shared_ptr<const toolcall::ToolCallFormat> output_tool_format(const ToolRequest& request,
                                                                   const ToolServingOptions& options) {
  switch (request.choice) {
    case ToolRequest::Choice::kNone:
      return nullptr;
    case ToolRequest::Choice::kAuto:
      return options.parser.empty() ? nullptr : toolcall::make_tool_call_format(options.parser);
    case ToolRequest::Choice::kRequired:
      return toolcall::required_calls_format();
    case ToolRequest::Choice::kFunction:
      return toolcall::named_function_format(request.function);
  }
  return nullptr;
}

}  // namespace pagoda::server
