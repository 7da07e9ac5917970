// Incremental scanning of tool-call JSON (json_scan.h).
#include "pagoda/toolcall/json_scan.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace pagoda::toolcall {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The characters of true/false/null and of numbers.
bool is_literal_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '+' || c == '-' || c == '.';
}

// A string starting at pos (text[pos] == '"').
ValueScan scan_string(std::string_view text, size_t pos) {
  for (size_t i = pos + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\') {
      ++i;  // the escaped character cannot end the string
    } else if (c == '"') {
      return {ScanStatus::kComplete, i + 1};
    } else if (static_cast<unsigned char>(c) < 0x20) {
      return {ScanStatus::kInvalid, i};  // JSON strings hold no raw control characters
    }
  }
  return {ScanStatus::kIncomplete, text.size()};
}

std::optional<std::string> decode_string(std::string_view token) {
  const auto j = nlohmann::json::parse(token, nullptr, /*allow_exceptions=*/false);
  if (!j.is_string()) return std::nullopt;
  return j.get<std::string>();
}

bool parses(std::string_view text) { return nlohmann::json::accept(text); }

}  // namespace

size_t skip_whitespace(std::string_view text, size_t pos) {
  while (pos < text.size() && is_space(text[pos])) ++pos;
  return pos;
}

ValueScan scan_json_value(std::string_view text, size_t pos) {
  if (pos >= text.size()) return {ScanStatus::kIncomplete, text.size()};
  const char first = text[pos];
  if (first == '"') return scan_string(text, pos);
  if (first == '{' || first == '[') {
    std::vector<char> closers;  // the brackets still open, innermost last
    for (size_t i = pos; i < text.size(); ++i) {
      const char c = text[i];
      if (c == '"') {
        const ValueScan s = scan_string(text, i);
        if (s.status != ScanStatus::kComplete) return s;
        i = s.end - 1;
      } else if (c == '{' || c == '[') {
        closers.push_back(c == '{' ? '}' : ']');
      } else if (c == '}' || c == ']') {
        if (closers.empty() || closers.back() != c) return {ScanStatus::kInvalid, i};
        closers.pop_back();
        if (closers.empty()) return {ScanStatus::kComplete, i + 1};
      } else if (!is_space(c) && !is_literal_char(c) && c != ',' && c != ':') {
        return {ScanStatus::kInvalid, i};
      }
    }
    return {ScanStatus::kIncomplete, text.size()};
  }
  size_t i = pos;
  while (i < text.size() && is_literal_char(text[i])) ++i;
  if (i == pos) return {ScanStatus::kInvalid, pos};
  if (i == text.size()) return {ScanStatus::kIncomplete, i};  // a number may still grow
  return {ScanStatus::kComplete, i};
}

CallObjectScan scan_call_object(std::string_view text, size_t pos, std::span<const std::string_view> argument_keys) {
  CallObjectScan out;
  const auto incomplete = [&] {
    out.status = ScanStatus::kIncomplete;
    return out;
  };
  const auto invalid = [&] {
    out.status = ScanStatus::kInvalid;
    return out;
  };
  if (pos >= text.size()) return incomplete();
  if (text[pos] != '{') return invalid();
  size_t i = skip_whitespace(text, pos + 1);
  bool first_member = true;
  while (true) {
    if (i >= text.size()) return incomplete();
    if (text[i] == '}' && first_member) break;
    if (text[i] != '"') return invalid();
    const ValueScan key_scan = scan_string(text, i);
    if (key_scan.status != ScanStatus::kComplete) return key_scan.status == ScanStatus::kIncomplete ? incomplete() : invalid();
    const std::optional<std::string> key = decode_string(text.substr(i, key_scan.end - i));
    if (!key) return invalid();
    i = skip_whitespace(text, key_scan.end);
    if (i >= text.size()) return incomplete();
    if (text[i] != ':') return invalid();
    i = skip_whitespace(text, i + 1);
    if (i >= text.size()) return incomplete();
    const ValueScan value = scan_json_value(text, i);
    if (value.status == ScanStatus::kInvalid) return invalid();
    const bool is_arguments = std::find(argument_keys.begin(), argument_keys.end(), *key) != argument_keys.end();
    if (*key == "name") {
      if (text[i] != '"' || out.name) return invalid();
      if (value.status == ScanStatus::kComplete) {
        out.name = decode_string(text.substr(i, value.end - i));
        if (!out.name) return invalid();
      }
    } else if (is_arguments) {
      if (text[i] != '{' || out.arguments_begin) return invalid();  // OpenAI's arguments are a JSON object
      out.arguments_begin = i;
      out.arguments_end = value.status == ScanStatus::kComplete ? value.end : text.size();
      out.arguments_complete = value.status == ScanStatus::kComplete;
    }
    if (value.status == ScanStatus::kIncomplete) return incomplete();
    i = skip_whitespace(text, value.end);
    if (i >= text.size()) return incomplete();
    if (text[i] == '}') break;
    if (text[i] != ',') return invalid();
    i = skip_whitespace(text, i + 1);
    first_member = false;
  }
  out.end = i + 1;
  if (!out.name || !out.arguments_begin || !parses(text.substr(pos, out.end - pos))) return invalid();
  out.status = ScanStatus::kComplete;
  return out;
}

CallArrayScan scan_call_array(std::string_view text, size_t pos, std::span<const std::string_view> argument_keys) {
  CallArrayScan out;
  if (pos >= text.size()) {
    out.status = ScanStatus::kIncomplete;
    return out;
  }
  if (text[pos] != '[') return out;
  size_t i = pos + 1;
  while (true) {
    i = skip_whitespace(text, i);
    CallObjectScan call = scan_call_object(text, i, argument_keys);
    out.status = call.status;
    if (call.status == ScanStatus::kInvalid) return out;
    out.calls.push_back(std::move(call));
    if (out.status == ScanStatus::kIncomplete) return out;
    i = skip_whitespace(text, out.calls.back().end);
    if (i >= text.size()) {
      out.status = ScanStatus::kIncomplete;
      return out;
    }
    if (text[i] == ']') break;
    if (text[i] != ',') {
      out.status = ScanStatus::kInvalid;
      return out;
    }
    ++i;
  }
  out.end = i + 1;
  out.status = ScanStatus::kComplete;
  return out;
}

size_t partial_marker_suffix(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

}  // namespace pagoda::toolcall
