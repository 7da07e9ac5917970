// ToolCallFormat: how one family of models writes tool calls in its output text (vLLM's --tool-call-parser
// names), and the two shapes a forced tool_choice makes the output take. A format reads a text into content
// and tool calls; read while the text is still arriving (`final` false) it reports only what cannot change
// any more, so that a stream can send it (tool_call_stream.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::toolcall {

struct ScannedCall {
  std::string name;
  std::string arguments;  // the arguments object as the model wrote it (JSON text); a prefix of it while partial
  // Partial scans: whether the call can no longer stop being one, however the text goes on (its object complete
  // and valid, and, where the format says so, the array around it). A stream sends a call only once it is settled,
  // so that what it sent is what the whole output gives (a name and half its arguments, sent early, could turn out
  // to be text).
  bool settled = true;
};

struct ToolCallScan {
  // final scans: whether the text holds tool calls as the format writes them. When it does not, the whole text
  // is content (never an error), as vLLM's parsers fall back.
  bool has_tool_calls = false;
  std::string content;              // text outside the calls (partial: the part that is settled)
  std::vector<ScannedCall> calls;   // partial: the calls already named, the last one's arguments maybe cut short
  // Partial scans: the format has ruled calls out, so the whole output is content however it goes on (a stream
  // then passes text through without scanning it again).
  bool only_content = false;
  // Final scans: the output ended inside its last call (max_tokens), whose arguments are then cut short; the
  // call is still returned, as OpenAI returns it with finish_reason "length".
  bool cut_off = false;
};

class ToolCallFormat {
 public:
  virtual ~ToolCallFormat() = default;
  // `final`: the text is the whole output. Otherwise `text` is a prefix of it, and the result must be a prefix
  // of the final one (content and each call's arguments extend, calls are only added) for any text that the
  // format reads as tool calls in the end.
  virtual ToolCallScan scan(std::string_view text, bool final) const = 0;
  // A fresh id for a call: "chatcmpl-tool-" and 32 hex digits, as vLLM's random_tool_call_id.
  virtual std::string new_call_id() const;
  // Whether special tokens must stay in the text the format reads (its markers are special tokens in the
  // models that use it); vLLM turns skip_special_tokens off for these parsers.
  virtual bool needs_special_tokens() const { return false; }
};

// The --tool-call-parser names: "llama3_json", "hermes", "mistral". Throws std::invalid_argument otherwise.
std::unique_ptr<ToolCallFormat> make_tool_call_format(std::string_view parser);
bool is_tool_call_parser(std::string_view parser);
inline constexpr std::string_view kToolCallParsers = "llama3_json, hermes, mistral";

// The output of tool_choice {"type": "function", "function": {"name": NAME}}: the output text is the
// arguments of one call to NAME (the schema forced on it is the function's parameters).
std::unique_ptr<ToolCallFormat> named_function_format(std::string name);
// The output of tool_choice "required": a JSON array of {"name": ..., "parameters": {...}} (vLLM's schema).
std::unique_ptr<ToolCallFormat> required_calls_format();

// Formats, one per file: llama3_json_format.cpp, hermes_format.cpp, mistral_format.cpp, forced_formats.cpp.
std::unique_ptr<ToolCallFormat> llama3_json_format();
std::unique_ptr<ToolCallFormat> hermes_format();
std::unique_ptr<ToolCallFormat> mistral_format();

}  // namespace pagoda::toolcall
