// UTF-8 validation and lossy repair (see utf8.h).
#include "pagoda/tokenizer/utf8.h"

namespace pagoda::utf8 {

namespace {
// Number of bytes of the longest prefix at s[i] that could still start a valid sequence (the
// "maximal subpart"), used so that each broken sequence becomes exactly one U+FFFD.
size_t maximal_subpart(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  uint8_t c = b(0);
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) need = 1;
  else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 1;
  }
  size_t k = 1;
  for (; k <= need && i + k < s.size(); ++k) {
    uint8_t x = b(k);
    if (k == 1 ? (x < lo || x > hi) : (x < 0x80 || x > 0xBF)) break;
  }
  return k;  // k == need + 1 means a complete, valid sequence
}
}  // namespace

size_t valid_char_length(std::string_view s, size_t i) {
  uint8_t c = static_cast<uint8_t>(s[i]);
  if (c < 0x80) return 1;
  size_t need = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
  size_t k = maximal_subpart(s, i);
  return (c >= 0xC2 && k == need + 1) ? k : 0;
}

bool is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<uint8_t>(s[i]) < 0x80) { ++i; continue; }
    size_t n = valid_char_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

size_t char_count(std::string_view s) {
  size_t count = 0;
  for (size_t i = 0; i < s.size(); ++count) i += static_cast<uint8_t>(s[i]) < 0x80 ? 1 : char_length(s, i);
  return count;
}

std::string repair(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    size_t n = valid_char_length(s, i);
    if (n != 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out.append(kReplacementChar);
      i += maximal_subpart(s, i);
    }
  }
  return out;
}

void append_code_point(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace pagoda::utf8
