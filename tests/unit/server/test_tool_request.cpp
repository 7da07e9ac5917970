// tools / tool_choice: defaults and 400s as vLLM's, the schema a forced choice puts on the output, what the
// template sees, and the tool-call messages a client sends back.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "pagoda/server/api_error.h"
#include "pagoda/server/openai_request.h"
#include "pagoda/server/tool_request.h"
#include "pagoda/toolcall/tool_call_parser.h"

namespace pagoda::server {
namespace {

using json = nlohmann::ordered_json;
using Choice = ToolRequest::Choice;

constexpr const char* kMessages = R"("messages": [{"role": "user", "content": "hi"}])";
constexpr const char* kTools = R"("tools": [{"type": "function", "function": {"name": "get_weather", "parameters":
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time"}}])";

ParsedRequest chat(const std::string& fields) {
  std::string body = fmt::format("{{{}, {}}}", kMessages, fields);
  return parse_chat_request(body);
}

// The field a 400 names ("<no error>" when the body is accepted), and its message.
std::pair<std::string, std::string> error_of(const std::string& fields) {
  try {
    chat(fields);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return {e.param(), e.what()};
  }
  return {"<no error>", ""};
}

TEST(ToolRequest, ToolChoiceDefaultsToAutoWithToolsElseNone) {
  EXPECT_EQ(chat(kTools).tools.choice, Choice::kAuto);
  EXPECT_EQ(chat(kTools).tools.tools.size(), 2u);
  EXPECT_EQ(parse_chat_request("{" + std::string(kMessages) + "}").tools.choice, Choice::kNone);
  EXPECT_EQ(chat(R"("tools": [])").tools.choice, Choice::kNone);
  EXPECT_EQ(chat(R"("tools": null, "tool_choice": null)").tools.choice, Choice::kNone);
}

TEST(ToolRequest, ChoicesAndTheConstraintTheyPutOnTheOutput) {
  EXPECT_EQ(chat(std::string(kTools) + R"(, "tool_choice": "none")").tools.choice, Choice::kNone);
  EXPECT_EQ(chat(R"("tool_choice": "none")").tools.choice, Choice::kNone);  // needs no tools
  const ParsedRequest autos = chat(std::string(kTools) + R"(, "tool_choice": "auto")");
  EXPECT_EQ(autos.tools.choice, Choice::kAuto);
  EXPECT_EQ(autos.constraint.kind, OutputConstraint::Kind::kNone);

  const ParsedRequest named = chat(std::string(kTools) + R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})");
  EXPECT_EQ(named.tools.choice, Choice::kFunction);
  EXPECT_EQ(named.tools.function, "get_weather");
  EXPECT_EQ(named.constraint.kind, OutputConstraint::Kind::kJsonSchema);
  EXPECT_EQ(named.constraint.spec, R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})");
  // A function without parameters takes an empty object.
  EXPECT_EQ(chat(std::string(kTools) + R"(, "tool_choice": {"type": "function", "function": {"name": "get_time"}})").constraint.spec,
            R"({"type":"object","properties":{}})");

  const ParsedRequest required = chat(std::string(kTools) + R"(, "tool_choice": "required")");
  EXPECT_EQ(required.tools.choice, Choice::kRequired);
  EXPECT_EQ(required.constraint.kind, OutputConstraint::Kind::kJsonSchema);
  // vLLM's schema, with the items' "type": "object" inside each anyOf branch (equivalent).
  EXPECT_EQ(json::parse(required.constraint.spec), json::parse(R"({"type": "array", "minItems": 1, "items": {
      "anyOf": [{"type": "object",
                 "properties": {"name": {"type": "string", "enum": ["get_weather"]},
                                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
                 "required": ["name", "parameters"]},
                {"type": "object",
                 "properties": {"name": {"type": "string", "enum": ["get_time"]},
                                "parameters": {"type": "object", "properties": {}}},
                 "required": ["name", "parameters"]}]}})"));
  // A forced choice is itself an output constraint: with another one it is a 400 (vLLM's message).
  const auto both = error_of(std::string(kTools) + R"(, "tool_choice": "required", "guided_regex": "a+")");
  EXPECT_EQ(both.first, "tool_choice");
  EXPECT_EQ(both.second, "You can only either use guided decoding or tools, not both.");
  EXPECT_EQ(chat(std::string(kTools) + R"(, "tool_choice": "auto", "guided_regex": "a+")").constraint.kind,
            OutputConstraint::Kind::kRegex);
  // "required" with nothing to call is "none" (vLLM, after OpenAI).
  EXPECT_EQ(chat(R"("tools": [], "tool_choice": "required")").tools.choice, Choice::kNone);
}

TEST(ToolRequest, RequiredSchemaHoistsDefs) {
  const ParsedRequest r = chat(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"p": {"$ref": "#/$defs/P"}}, "$defs": {"P": {"type": "integer"}}}}}], "tool_choice": "required")");
  const json schema = json::parse(r.constraint.spec);
  EXPECT_EQ(schema["$defs"], json::parse(R"({"P": {"type": "integer"}})"));
  EXPECT_FALSE(schema["items"]["anyOf"][0]["properties"]["parameters"].contains("$defs"));
}

TEST(ToolRequest, MalformedToolsAndChoicesAre400NamingTheField) {
  EXPECT_EQ(error_of(R"("tools": {"type": "function"})").first, "tools");
  EXPECT_EQ(error_of(R"("tools": ["get_weather"])").first, "tools[0]");
  EXPECT_EQ(error_of(R"("tools": [{"type": "function"}])").first, "tools[0].function");
  EXPECT_EQ(error_of(R"("tools": [{"type": "function", "function": {"description": "no name"}}])").first, "tools[0].function.name");
  EXPECT_EQ(error_of(R"("tools": [{"type": "function", "function": {"name": ""}}])").first, "tools[0].function.name");
  EXPECT_EQ(error_of(R"("tools": [{"type": "retrieval", "function": {"name": "f"}}])").first, "tools[0].type");
  EXPECT_EQ(error_of(R"("tools": [{"function": {"name": "f"}}, {"function": {"name": "g", "parameters": "x"}}])").first,
            "tools[1].function.parameters");

  const auto without_tools = error_of(R"("tool_choice": "auto")");
  EXPECT_EQ(without_tools.first, "tool_choice");
  EXPECT_EQ(without_tools.second, "When using `tool_choice`, `tools` must be set.");
  EXPECT_EQ(error_of(R"("tool_choice": "required")").first, "tool_choice");
  EXPECT_EQ(error_of(R"("tool_choice": {"type": "function", "function": {"name": "f"}})").first, "tool_choice");
  EXPECT_EQ(error_of(std::string(kTools) + R"(, "tool_choice": "sometimes")").first, "tool_choice");
  EXPECT_EQ(error_of(std::string(kTools) + R"(, "tool_choice": 3)").first, "tool_choice");
  EXPECT_EQ(error_of(std::string(kTools) + R"(, "tool_choice": {"type": "function"})").first, "tool_choice");
  EXPECT_EQ(error_of(std::string(kTools) + R"(, "tool_choice": {"type": "function", "function": {}})").first, "tool_choice");
  const auto unknown = error_of(std::string(kTools) + R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}})");
  EXPECT_EQ(unknown.first, "tool_choice");
  EXPECT_EQ(unknown.second, "The tool specified in `tool_choice` does not match any of the specified `tools`");
  // OpenAI's deprecated forms are refused by name.
  EXPECT_EQ(error_of(R"("functions": [{"name": "f"}])").first, "functions");
  EXPECT_EQ(error_of(R"("function_call": "auto")").first, "function_call");
}

TEST(ToolRequest, AutoNeedsTheServerFlags) {
  const ToolRequest r = chat(kTools).tools;
  try {
    check_tool_choice_served(r, ToolServingOptions{});
    ADD_FAILURE() << "auto was served without --enable-auto-tool-choice";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(std::string(e.what()), "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set");
  }
  EXPECT_THROW(check_tool_choice_served(r, ToolServingOptions{true, "", false}), ApiError);
  EXPECT_NO_THROW(check_tool_choice_served(r, ToolServingOptions{true, "llama3_json", false}));
  // Forced choices and "none" need no flags.
  EXPECT_NO_THROW(check_tool_choice_served(chat(std::string(kTools) + R"(, "tool_choice": "required")").tools, {}));
  EXPECT_NO_THROW(check_tool_choice_served(chat(std::string(kTools) + R"(, "tool_choice": "none")").tools, {}));
}

TEST(ToolRequest, TemplateToolsAndOutputFormat) {
  const ToolServingOptions served{true, "hermes", false};
  const ToolRequest autos = chat(kTools).tools;
  EXPECT_EQ(template_tools(autos, served), autos.tools);
  ASSERT_NE(output_tool_format(autos, served), nullptr);
  EXPECT_TRUE(output_tool_format(autos, served)->needs_special_tokens());  // hermes

  // tool_choice "none": the template still sees the tools unless the server excludes them; nothing is parsed.
  const ToolRequest none = chat(std::string(kTools) + R"(, "tool_choice": "none")").tools;
  EXPECT_EQ(template_tools(none, served), none.tools);
  EXPECT_TRUE(template_tools(none, ToolServingOptions{true, "hermes", true}).is_null());
  EXPECT_EQ(output_tool_format(none, served), nullptr);
  EXPECT_TRUE(template_tools(chat(R"("tools": [])").tools, served).is_null());

  // Forced choices are read whatever the parser: the named function's arguments, or the required array.
  const auto named = output_tool_format(
      chat(std::string(kTools) + R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})").tools, served);
  const toolcall::ParsedOutput n = toolcall::parse_tool_calls(*named, R"({"city": "Paris"})");
  ASSERT_EQ(n.tool_calls.size(), 1u);
  EXPECT_EQ(n.tool_calls[0].name, "get_weather");
  EXPECT_EQ(n.tool_calls[0].arguments, R"({"city": "Paris"})");
  const auto required = output_tool_format(chat(std::string(kTools) + R"(, "tool_choice": "required")").tools, ToolServingOptions{});
  const toolcall::ParsedOutput r =
      toolcall::parse_tool_calls(*required, R"([{"name": "get_time", "parameters": {}}, {"name": "get_weather", "parameters": {"city": "Oslo"}}])");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[1].arguments, R"({"city": "Oslo"})");
}

// Tool-call turns sent back: content null (or missing) is "", arguments strings become objects for the
// template, and bad shapes are 400s naming the field.
TEST(ToolRequest, ToolCallMessages) {
  const ParsedRequest r = parse_chat_request(R"({"messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"n\": [1, 2]}"}}]},
      {"role": "assistant", "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": ""}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "21 C"}]})");
  EXPECT_EQ(r.messages[1]["content"], "");
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"].dump(), R"({"city":"Paris","n":[1,2]})");
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(r.messages[2]["content"], "");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"], json::object());
  EXPECT_EQ(r.messages[3]["tool_call_id"], "c1");

  const auto param = [](const std::string& messages) {
    try {
      parse_chat_request(R"({"messages": )" + messages + "}");
    } catch (const ApiError& e) {
      return e.param();
    }
    return std::string("<no error>");
  };
  EXPECT_EQ(param(R"([{"role": "assistant", "tool_calls": {"id": "x"}}])"), "messages[0].tool_calls");
  EXPECT_EQ(param(R"([{"role": "assistant", "tool_calls": [{"id": "x"}]}])"), "messages[0].tool_calls[0]");
  EXPECT_EQ(param(R"([{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}])"),
            "messages[0].tool_calls[0].function.name");
  EXPECT_EQ(param(R"([{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}])"),
            "messages[1].tool_calls[0].function.arguments");
  EXPECT_EQ(param(R"([{"role": "tool", "tool_call_id": 7, "content": "x"}])"), "messages[0].tool_call_id");
}

}  // namespace
}  // namespace pagoda::server
