// UTF-8 helpers for the tokenizers: character lengths, code-point encoding, and lossy repair of invalid
// byte sequences with the same replacement rules as Rust's String::from_utf8_lossy (what HF emits).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda::utf8 {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if the bytes there are not one.
size_t valid_char_length(std::string_view s, size_t i);

// Length to step over at s[i] when splitting text into characters: the sequence length when valid,
// otherwise 1 (a stray byte is its own "character").
inline size_t char_length(std::string_view s, size_t i) {
  size_t n = valid_char_length(s, i);
  return n == 0 ? 1 : n;
}

bool is_valid(std::string_view s);

inline bool is_continuation(char byte) { return (static_cast<uint8_t>(byte) & 0xC0) == 0x80; }

// The length a sequence starting with `lead` claims: 1 for ASCII and for a byte that cannot start one.
inline size_t sequence_length(char lead) {
  const auto c = static_cast<uint8_t>(lead);
  return c >= 0xF8 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
}

// Characters in s as char_length steps them: its code points when s is valid UTF-8 (a stray byte counts one).
// What OpenAI's and vLLM's `text_offset` count (Python string indices), not bytes.
size_t char_count(std::string_view s);

// Replaces each maximal invalid subsequence with U+FFFD (Unicode "maximal subpart" practice).
std::string repair(std::string_view s);

void append_code_point(std::string& out, uint32_t cp);

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

}  // namespace pagoda::utf8
