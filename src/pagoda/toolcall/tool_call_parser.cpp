// Whole and streamed tool-call parsing (tool_call_parser.h).
#include "pagoda/toolcall/tool_call_parser.h"

namespace pagoda::toolcall {
namespace {

// An output that ended inside its only call otherwise than at max_tokens (end of sequence, a stop string) does not
// parse. After complete calls the cut one is still returned cut short: a stream cannot take back calls it sent.
bool only_call_unfinished(const ToolCallScan& scan, bool ended_by_length) {
  return scan.cut_off && !ended_by_length && scan.calls.size() == 1;
}

}  // namespace

ParsedOutput parse_tool_calls(const ToolCallFormat& format, std::string_view text, bool ended_by_length) {
  ToolCallScan scan = format.scan(text, /*final=*/true);
  ParsedOutput out;
  if (!scan.has_tool_calls || only_call_unfinished(scan, ended_by_length)) {
    out.content = text;
    return out;
  }
  out.content = std::move(scan.content);
  out.cut_off = scan.cut_off;
  for (ScannedCall& c : scan.calls) out.tool_calls.push_back({format.new_call_id(), std::move(c.name), std::move(c.arguments)});
  return out;
}

std::vector<OutputDelta> ToolCallStream::push(std::string_view text) {
  if (text.empty()) return {};
  if (only_content_) {
    return {{std::string(text), std::nullopt}};
  }
  text_ += text;
  const ToolCallScan scan = format_.scan(text_, /*final=*/false);
  std::vector<OutputDelta> out = advance(scan, /*final=*/false);
  // Only a scan that sent all the text so far as content may switch to passing text through.
  only_content_ = scan.only_content && calls_.empty() && content_sent_ == text_;
  return out;
}

std::vector<OutputDelta> ToolCallStream::finish(bool ended_by_length) {
  if (only_content_) return {};
  ToolCallScan scan = format_.scan(text_, /*final=*/true);
  if (!scan.has_tool_calls || (only_call_unfinished(scan, ended_by_length) && calls_.empty())) {
    scan.calls.clear();
    scan.content = text_;
  }
  return advance(scan, /*final=*/true);
}

std::vector<OutputDelta> ToolCallStream::advance(const ToolCallScan& scan, bool final) {
  std::vector<OutputDelta> out;
  // Only growth is sent: what was sent cannot be taken back, so a scan that disagrees with it (an output
  // that stopped being a call after naming one) adds nothing there.
  if (scan.content.size() > content_sent_.size() && scan.content.starts_with(content_sent_)) {
    out.push_back({scan.content.substr(content_sent_.size()), std::nullopt});
    content_sent_ = scan.content;
  }
  for (size_t i = 0; i < scan.calls.size(); ++i) {
    const ScannedCall& call = scan.calls[i];
    if (!final && !call.settled) break;  // sent once it can no longer turn out to be text
    const int index = static_cast<int>(i);
    if (i == calls_.size()) {
      calls_.push_back({call.name, 0});
      out.push_back({"", ToolCallDelta{index, format_.new_call_id(), call.name, ""}});
    }
    SentCall& sent = calls_[i];
    if (sent.name != call.name || call.arguments.size() <= sent.arguments_sent) continue;
    out.push_back({"", ToolCallDelta{index, std::nullopt, std::nullopt, call.arguments.substr(sent.arguments_sent)}});
    sent.arguments_sent = call.arguments.size();
  }
  return out;
}

}  // namespace pagoda::toolcall
