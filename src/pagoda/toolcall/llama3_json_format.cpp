// llama3_json: Llama 3.1/3.2's JSON tool calls. The output is a JSON object {"name": ..., "parameters": {...}}
// ("arguments" is read too), optionally after <|python_tag|>, several separated by ";". vLLM's
// Llama3JsonToolParser reads the same; text after the last call is kept as content here rather than dropped.
#include "pagoda/toolcall/json_scan.h"
#include "pagoda/toolcall/tool_call_format.h"

namespace pagoda::toolcall {
namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kArgumentKeys[] = {"parameters", "arguments"};

class Llama3JsonFormat final : public ToolCallFormat {
 public:
  ToolCallScan scan(std::string_view text, bool final) const override {
    ToolCallScan out;
    ToolCallScan plain;
    plain.content = text;
    plain.only_content = true;  // read as content once, it stays content: calls come first or not at all
    size_t pos = skip_whitespace(text, 0);
    if (text.substr(pos).starts_with(kPythonTag)) {
      pos = skip_whitespace(text, pos + kPythonTag.size());
    } else if (!final && kPythonTag.starts_with(text.substr(pos))) {
      return out;  // the tag may be arriving (or nothing but whitespace yet)
    }
    if (pos >= text.size()) return final ? plain : out;
    if (text[pos] != '{') return plain;  // not a tool call: everything is content, from the first delta on
    while (true) {
      const CallObjectScan call = scan_call_object(text, pos, kArgumentKeys);
      const bool cut_off = final && call.status == ScanStatus::kIncomplete && call.committed();
      if (call.status == ScanStatus::kInvalid || (final && call.status == ScanStatus::kIncomplete && !cut_off)) {
        // The first object decides whether this is a tool call at all; a bad later one is left as content.
        if (out.calls.empty()) return plain;
        break;
      }
      if (call.status == ScanStatus::kIncomplete) {
        if (call.committed()) out.calls.push_back(ScannedCall{*call.name, call.arguments(text), /*settled=*/false});
        out.has_tool_calls = out.cut_off = cut_off;
        return out;
      }
      out.calls.push_back(ScannedCall{*call.name, call.arguments(text)});
      pos = skip_whitespace(text, call.end);
      if (pos >= text.size() || text[pos] != ';') break;
      pos = skip_whitespace(text, pos + 1);
      if (pos >= text.size() && !final) return out;  // the next call may follow
      if (pos >= text.size() || text[pos] != '{') break;
    }
    out.content = text.substr(pos);
    out.has_tool_calls = true;
    return out;
  }
};

}  // namespace

std::unique_ptr<ToolCallFormat> llama3_json_format() { return std::make_unique<Llama3JsonFormat>(); }

}  // namespace pagoda::toolcall
