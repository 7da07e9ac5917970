// GPT-2 byte <-> character tables (see byte_level.h).
#include "pagoda/tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "pagoda/tokenizer/utf8.h"

namespace pagoda::byte_level {

namespace {
struct Tables {
  std::array<std::string, 256> byte_to_text;
  std::array<int16_t, 512> code_point_to_byte;  // every mapped code point is < 324

  Tables() {
    code_point_to_byte.fill(-1);
    auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : static_cast<uint32_t>(next++);
      utf8::append_code_point(byte_to_text[b], cp);
      code_point_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}
}  // namespace

void encode_append(std::string_view bytes, std::string& out) {
  const Tables& t = tables();
  for (char c : bytes) out += t.byte_to_text[static_cast<uint8_t>(c)];
}

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  encode_append(bytes, out);
  return out;
}

std::optional<std::string> decode(std::string_view token) {
  const Tables& t = tables();
  std::string out;
  out.reserve(token.size());
  for (size_t i = 0; i < token.size();) {
    uint8_t c = static_cast<uint8_t>(token[i]);
    uint32_t cp;
    if (c < 0x80) {
      cp = c;
      i += 1;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < token.size()) {
      cp = ((c & 0x1Fu) << 6) | (static_cast<uint8_t>(token[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return std::nullopt;  // 3+ byte characters are never in the alphabet
    }
    if (cp >= t.code_point_to_byte.size() || t.code_point_to_byte[cp] < 0) return std::nullopt;
    out += static_cast<char>(t.code_point_to_byte[cp]);
  }
  return out;
}

}  // namespace pagoda::byte_level
