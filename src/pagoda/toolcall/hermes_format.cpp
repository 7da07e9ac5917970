// hermes: Hermes-2-Pro / Qwen2.5 style. Each call is a block <tool_call>{"name": ..., "arguments": {...}}</tool_call>;
// text outside the blocks is content (text after a block from its first non-space character, so the newlines
// between blocks do not become content). As in vLLM's Hermes2ProToolParser, a last block left unclosed at the
// end of the output still counts.
#include "pagoda/toolcall/json_scan.h"
#include "pagoda/toolcall/tool_call_format.h"

namespace pagoda::toolcall {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kArgumentKeys[] = {"arguments", "parameters"};

class HermesFormat final : public ToolCallFormat {
 public:
  ToolCallScan scan(std::string_view text, bool final) const override {
    ToolCallScan out;
    size_t pos = 0;
    bool after_call = false;
    while (true) {
      const size_t open = text.find(kOpen, pos);
      std::string_view segment = text.substr(pos, open == std::string_view::npos ? std::string_view::npos : open - pos);
      if (after_call) segment.remove_prefix(skip_whitespace(segment, 0));
      if (open == std::string_view::npos) {
        if (!final) segment.remove_suffix(partial_marker_suffix(segment, kOpen));  // a block may be opening
        out.content += segment;
        break;
      }
      out.content += segment;
      const CallObjectScan call = scan_call_object(text, skip_whitespace(text, open + kOpen.size()), kArgumentKeys);
      const bool cut_off = final && call.status == ScanStatus::kIncomplete && call.committed();
      if (call.status == ScanStatus::kInvalid || (final && call.status == ScanStatus::kIncomplete && !cut_off)) {
        if (out.calls.empty()) return plain(text);
        out.content += text.substr(open);  // a bad block after good ones stays as text
        break;
      }
      if (call.status == ScanStatus::kIncomplete) {
        if (call.committed()) out.calls.push_back(ScannedCall{*call.name, call.arguments(text), /*settled=*/false});
        out.has_tool_calls = out.cut_off = cut_off;
        return out;
      }
      out.calls.push_back(ScannedCall{*call.name, call.arguments(text)});
      const size_t p = skip_whitespace(text, call.end);
      after_call = true;
      if (text.substr(p).starts_with(kClose)) {
        pos = p + kClose.size();
      } else if (!final && kClose.starts_with(text.substr(p))) {
        return out;  // the closing tag may be arriving
      } else {
        pos = p;  // unclosed: what follows is text
      }
    }
    out.has_tool_calls = !out.calls.empty();
    return out;
  }
  bool needs_special_tokens() const override { return true; }

 private:
  static ToolCallScan plain(std::string_view text) {
    ToolCallScan p;
    p.content = text;
    return p;
  }
};

}  // namespace

std::unique_ptr<ToolCallFormat> hermes_format() { return std::make_unique<HermesFormat>(); }

}  // namespace pagoda::toolcall
