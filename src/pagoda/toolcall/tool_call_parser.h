// A model's output text as OpenAI's chat message: content and tool_calls, whole (parse_tool_calls) or as the
// deltas of a stream (ToolCallStream). The format (tool_call_format.h) says how the model writes its calls.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pagoda/toolcall/tool_call_format.h"

namespace pagoda::toolcall {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object, as text
};

struct ParsedOutput {
  std::string content;  // the whole text when there are no calls; else the text outside them (maybe "")
  std::vector<ToolCall> tool_calls;
  bool cut_off = false;  // the output ended inside the last call: its arguments are cut short (finish "length")
};

// `ended_by_length`: the output ended at max_tokens. Only then is an output that ends inside its only call read as
// that call cut short; one that ended there otherwise (end of sequence, a stop string) is content, all of it, as
// vLLM's parsers return text that does not parse. After complete calls, the cut one is returned cut short.
ParsedOutput parse_tool_calls(const ToolCallFormat& format, std::string_view text, bool ended_by_length = true);

// One entry of a chunk's delta.tool_calls. The first for a call carries its id, type "function", name and
// arguments ""; later ones carry only argument text to append.
struct ToolCallDelta {
  int index = 0;
  std::optional<std::string> id;    // with the name, on the call's first delta
  std::optional<std::string> name;
  std::string arguments;
};

// What one chunk adds: content text, or one tool-call entry.
struct OutputDelta {
  std::string content;
  std::optional<ToolCallDelta> tool_call;
};

// Turns text deltas into OpenAI's chat deltas. Text that may still turn out to be part of a call (the start of
// a marker, a JSON object before its name) is held back until it is settled, and so is each call: it is sent
// (its id and name, then its arguments) once it can no longer turn out to be text (ScannedCall::settled), so for
// every output the deltas add up to parse_tool_calls' result: the same content, names and arguments. (A call
// whose object turned out malformed at its end was sent as a call before, while the whole text read as content.)
// An output cut off inside a call, by max_tokens, is read as that call with its arguments cut short, both ways.
class ToolCallStream {
 public:
  explicit ToolCallStream(const ToolCallFormat& format) : format_(format) {}
  // The deltas that `text` (the next piece of output) settles, in order.
  std::vector<OutputDelta> push(std::string_view text);
  // At the end of the output: the rest. `ended_by_length` as parse_tool_calls'.
  std::vector<OutputDelta> finish(bool ended_by_length = true);
  // Whether a tool call was sent (then finish_reason "stop" becomes "tool_calls").
  bool called() const { return !calls_.empty(); }

 private:
  // `final`: the scan of the whole output (every call in it is sent, settled or not).
  std::vector<OutputDelta> advance(const ToolCallScan& scan, bool final);

  const ToolCallFormat& format_;
  std::string text_;
  bool only_content_ = false;  // the format ruled calls out: text passes through (no rescans, linear time)
  std::string content_sent_;
  struct SentCall {
    std::string name;
    size_t arguments_sent = 0;
  };
  std::vector<SentCall> calls_;
};

}  // namespace pagoda::toolcall
