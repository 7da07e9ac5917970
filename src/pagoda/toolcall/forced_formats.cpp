// The outputs a forced tool_choice asks for (vLLM forces them with guided decoding and reads them whatever
// --tool-call-parser says): a named function's arguments, or for "required" an array of calls.
#include "pagoda/toolcall/json_scan.h"
#include "pagoda/toolcall/tool_call_format.h"

namespace pagoda::toolcall {
namespace {

// The whole output is the arguments of one call to the named function.
class NamedFunctionFormat final : public ToolCallFormat {
 public:
  explicit NamedFunctionFormat(std::string name) : name_(std::move(name)) {}
  ToolCallScan scan(std::string_view text, bool /*final*/) const override {
    ToolCallScan out;
    out.has_tool_calls = true;
    out.calls.push_back({name_, std::string(text)});
    return out;
  }

 private:
  std::string name_;
};

// [{"name": ..., "parameters": {...}}, ...]: vLLM's schema for tool_choice "required". Output that is not such an
// array (possible only while nothing enforces the schema) is content.
class RequiredCallsFormat final : public ToolCallFormat {
 public:
  ToolCallScan scan(std::string_view text, bool final) const override {
    static constexpr std::string_view kArgumentKeys[] = {"parameters"};
    ToolCallScan out;
    const size_t begin = skip_whitespace(text, 0);
    const CallArrayScan array = scan_call_array(text, begin, kArgumentKeys);
    for (const CallObjectScan& c : array.calls) {
      if (c.status != ScanStatus::kComplete && !c.committed()) break;
      // Settled with the array's end: a later element that is not a call makes it all text (where nothing
      // enforces the schema).
      out.calls.push_back({*c.name, c.arguments(text), array.status == ScanStatus::kComplete});
    }
    const bool cut_off = final && array.status == ScanStatus::kIncomplete && !out.calls.empty();
    if (array.status == ScanStatus::kInvalid || (final && array.status == ScanStatus::kIncomplete && !cut_off)) {
      ToolCallScan plain;
      if (final || array.calls.empty()) {  // plain text, settled as soon as it is known
        plain.content = text;
        plain.only_content = true;
      }
      return plain;
    }
    if (array.status == ScanStatus::kIncomplete) {
      out.has_tool_calls = out.cut_off = cut_off;  // cut off inside the array: the calls so far
      return out;
    }
    out.content = text.substr(skip_whitespace(text, array.end));
    out.has_tool_calls = true;
    return out;
  }
};

}  // namespace

std::unique_ptr<ToolCallFormat> named_function_format(std::string name) {
  return std::make_unique<NamedFunctionFormat>(std::move(name));
}
std::unique_ptr<ToolCallFormat> required_calls_format() { return std::make_unique<RequiredCallsFormat>(); }

}  // namespace pagoda::toolcall
