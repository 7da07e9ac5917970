// mistral: Mistral's tool calls, [TOOL_CALLS] then a JSON array [{"name": ..., "arguments": {...}}, ...].
// Text before the marker is content, as in vLLM's MistralToolParser; so is text after the array. Call ids
// are 9 letters and digits, the form Mistral's chat templates require of the ids sent back to them.
// (The later "[TOOL_CALLS]name[ARGS]{...}" form of Mistral's v11 tokenizers is not read.)
#include <random>

#include "pagoda/toolcall/json_scan.h"
#include "pagoda/toolcall/tool_call_format.h"

namespace pagoda::toolcall {
namespace {

constexpr std::string_view kMarker = "[TOOL_CALLS]";
constexpr std::string_view kArgumentKeys[] = {"arguments"};

class MistralFormat final : public ToolCallFormat {
 public:
  ToolCallScan scan(std::string_view text, bool final) const override {
    ToolCallScan out;
    const size_t marker = text.find(kMarker);
    if (marker == std::string_view::npos) {
      std::string_view content = text;
      if (!final) content.remove_suffix(partial_marker_suffix(content, kMarker));
      out.content = content;
      return out;
    }
    out.content = text.substr(0, marker);
    const CallArrayScan array = scan_call_array(text, skip_whitespace(text, marker + kMarker.size()), kArgumentKeys);
    ToolCallScan plain;
    plain.content = text;
    if (array.status == ScanStatus::kInvalid) return plain;
    for (const CallObjectScan& c : array.calls) {
      if (c.status != ScanStatus::kComplete && !c.committed()) break;
      // A later element that is not a call makes the whole array text: nothing is settled before its end.
      out.calls.push_back({*c.name, c.arguments(text), array.status == ScanStatus::kComplete});
    }
    if (array.status == ScanStatus::kIncomplete) {
      if (!final) return out;
      if (out.calls.empty()) return plain;
      out.has_tool_calls = out.cut_off = true;  // cut off inside the array: the calls so far
      return out;
    }
    out.content += text.substr(skip_whitespace(text, array.end));
    out.has_tool_calls = true;
    return out;
  }

  std::string new_call_id() const override {
    static constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::string id(9, ' ');
    for (char& c : id) c = kAlphabet[rng() % kAlphabet.size()];
    return id;
  }
  bool needs_special_tokens() const override { return true; }
};

}  // namespace

std::unique_ptr<ToolCallFormat> mistral_format() { return std::make_unique<MistralFormat>(); }

}  // namespace pagoda::toolcall
