// Reading the JSON a model writes for its tool calls while it is still arriving: where one value ends, and
// which members of a {"name": ..., "arguments": {...}} object (or an array of them) are already complete.
// Streaming needs this before the text is whole; a complete object is also checked with a real JSON parser.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::toolcall {

enum class ScanStatus {
  kComplete,    // the value (object, array) ends inside the text
  kIncomplete,  // the text ends first, and is a prefix of what the value could still become
  kInvalid,     // not JSON of the expected shape, however the text continues
};

size_t skip_whitespace(std::string_view text, size_t pos);

struct ValueScan {
  ScanStatus status = ScanStatus::kInvalid;
  size_t end = 0;  // kComplete: one past the value
};
// One JSON value starting at `pos`. Checks brackets, strings and escapes, and that a bare literal or number is
// made of the characters they use; the grammar in full is left to the parser that reads a complete value.
ValueScan scan_json_value(std::string_view text, size_t pos);

// A tool-call object: {"name": "f", "<one of argument_keys>": {...}} in any key order; other keys are allowed.
struct CallObjectScan {
  ScanStatus status = ScanStatus::kInvalid;
  size_t end = 0;                   // kComplete: one past the closing brace
  std::optional<std::string> name;  // once its string is complete
  std::optional<size_t> arguments_begin;  // once the arguments object has begun
  size_t arguments_end = 0;         // one past what of it the text holds (all of it when arguments_complete)
  bool arguments_complete = false;
  // Whether what the text holds already names the call and has begun its arguments: the point from which a
  // stream commits to the object being a tool call.
  bool committed() const { return name.has_value() && arguments_begin.has_value(); }
  // The arguments as far as `text` (the text scanned) holds them; committed() calls only.
  std::string arguments(std::string_view text) const {
    return std::string(text.substr(*arguments_begin, arguments_end - *arguments_begin));
  }
};
// Complete only when both the name and the arguments (an object) are present and the whole object parses.
CallObjectScan scan_call_object(std::string_view text, size_t pos, std::span<const std::string_view> argument_keys);

// A JSON array of tool-call objects: [{...}, {...}] (at least one).
struct CallArrayScan {
  ScanStatus status = ScanStatus::kInvalid;
  size_t end = 0;  // kComplete: one past the closing bracket
  std::vector<CallObjectScan> calls;  // complete ones, then the one in progress (if any)
};
CallArrayScan scan_call_array(std::string_view text, size_t pos, std::span<const std::string_view> argument_keys);

// Whether `text` ends with a proper prefix of `marker` (so it may be the marker's start): that many bytes.
size_t partial_marker_suffix(std::string_view text, std::string_view marker);

}  // namespace pagoda::toolcall
