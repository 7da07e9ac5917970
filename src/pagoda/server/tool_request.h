// The tools a chat request offers and how it lets the model use them (`tools`, `tool_choice`), checked as vLLM
// checks them, and what follows from them: the template's `tools` variable, the JSON schema a forced choice
// puts on the output, and the format the output is read in (toolcall/).
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "pagoda/toolcall/tool_call_format.h"

namespace pagoda::server {

struct ToolRequest {
  enum class Choice {
    kNone,      // no calls are read from the output (the template may still see the tools)
    kAuto,      // the model may call; --tool-call-parser reads its output
    kRequired,  // at least one call, forced through the output schema
    kFunction,  // one call to `function`, forced through the output schema
  };
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // as sent: [{"type": "function", "function": {...}}]
  Choice choice = Choice::kNone;
  std::string function;  // kFunction: its name
};

// `pagoda serve`'s tool-calling flags (vLLM's).
struct ToolServingOptions {
  bool enable_auto_tool_choice = false;  // --enable-auto-tool-choice
  std::string parser;                    // --tool-call-parser ("" : none)
  bool exclude_tools_when_tool_choice_none = false;  // --exclude-tools-when-tool-choice-none
};

// `tools` and `tool_choice` of a chat body. tool_choice defaults to "auto" when tools are given, else "none";
// "required" with an empty list of tools is "none" (vLLM, after OpenAI). Throws ApiError (400) naming the field.
ToolRequest parse_tool_request(const nlohmann::ordered_json& body);

// The JSON schema (as text) that tool_choice "required" or a named function puts on the output, as vLLM's
// _get_json_schema_from_tool builds it (for "required", with "type": "object" moved into each anyOf branch, an
// equivalent form structured/ compiles); "" for "none" and "auto".
std::string forced_tool_schema(const ToolRequest& request);

// What the chat template gets as `tools`: the list as sent, or null when there is none (or tool_choice is
// "none" and the server excludes tools then).
nlohmann::ordered_json template_tools(const ToolRequest& request, const ToolServingOptions& options);

// 400 for tool_choice "auto" on a server started without --enable-auto-tool-choice and --tool-call-parser
// (vLLM's message).
void check_tool_choice_served(const ToolRequest& request, const ToolServingOptions& options);

// How the output is read: the parser's format for "auto", the forced shapes for "required" and a named
// function, none (plain content) for "none".
std::shared_ptr<const toolcall::ToolCallFormat> output_tool_format(const ToolRequest& request,
                                                                   const ToolServingOptions& options);

}  // namespace pagoda::server
