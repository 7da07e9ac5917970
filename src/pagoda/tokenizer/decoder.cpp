// The decoder steps (see decoder.h). Each mirrors the HF decoder of the same name, including how it
// treats broken UTF-8: ByteLevel repairs the joined bytes lossily, ByteFallback emits one U+FFFD per
// byte of an invalid run.
#include "pagoda/tokenizer/decoder.h"

#include <cstdint>
#include <optional>

#include "pagoda/tokenizer/byte_level.h"
#include "pagoda/tokenizer/replace_all.h"
#include "pagoda/tokenizer/utf8.h"

namespace pagoda {

namespace {
std::optional<uint8_t> parse_byte_token(const std::string& t) {  // "<0xAB>"
  if (t.size() != 6 || t[0] != '<' || t[1] != '0' || t[2] != 'x' || t[5] != '>') return std::nullopt;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int hi = hex(t[3]), lo = hex(t[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<uint8_t>(hi * 16 + lo);
}

std::vector<std::string> byte_level_step(std::vector<std::string> tokens, bool keep_invalid_bytes) {
  std::string bytes;
  for (const auto& t : tokens) {
    if (auto raw = byte_level::decode(t)) bytes += *raw;
    else bytes += t;
  }
  return {keep_invalid_bytes ? bytes : utf8::repair(bytes)};
}

std::vector<std::string> byte_fallback(std::vector<std::string> tokens, bool keep_invalid_bytes) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string pending;  // consecutive byte tokens
  size_t pending_count = 0;
  auto flush = [&] {
    if (pending_count == 0) return;
    if (keep_invalid_bytes || utf8::is_valid(pending)) {
      out.push_back(pending);
    } else {
      for (size_t i = 0; i < pending_count; ++i) out.emplace_back(utf8::kReplacementChar);
    }
    pending.clear();
    pending_count = 0;
  };
  for (auto& t : tokens) {
    if (auto b = parse_byte_token(t)) {
      pending += static_cast<char>(*b);
      ++pending_count;
    } else {
      flush();
      out.push_back(std::move(t));
    }
  }
  flush();
  return out;
}

// Strips up to `count` copies of the character `c` (as UTF-8) from one side of `t`.
void strip(std::string& t, const std::string& c, int start, int stop) {
  if (c.empty()) return;
  for (int i = 0; i < start && t.compare(0, c.size(), c) == 0; ++i) t.erase(0, c.size());
  for (int i = 0; i < stop && t.size() >= c.size() && t.compare(t.size() - c.size(), c.size(), c) == 0; ++i) {
    t.erase(t.size() - c.size());
  }
}
}  // namespace

std::string run_decoder(const std::vector<DecoderStep>& steps, std::vector<std::string> tokens,
                        bool keep_invalid_bytes) {
  if (steps.empty()) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
    return keep_invalid_bytes ? joined : utf8::repair(joined);
  }
  for (const DecoderStep& step : steps) {
    switch (step.kind) {
      case DecoderStep::Kind::kByteLevel:
        tokens = byte_level_step(std::move(tokens), keep_invalid_bytes);
        break;
      case DecoderStep::Kind::kReplace:
        for (auto& t : tokens) replace_all(t, step.pattern, step.content);
        break;
      case DecoderStep::Kind::kByteFallback:
        tokens = byte_fallback(std::move(tokens), keep_invalid_bytes);
        break;
      case DecoderStep::Kind::kFuse: {
        std::string joined;
        for (const auto& t : tokens) joined += t;
        tokens.assign(1, std::move(joined));
        break;
      }
      case DecoderStep::Kind::kStrip:
        for (auto& t : tokens) strip(t, step.content, step.start, step.stop);
        break;
      case DecoderStep::Kind::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          replace_all(tokens[i], step.pattern, " ");
          if (i == 0 && step.strip_first_space && !tokens[i].empty() && tokens[i][0] == ' ') tokens[i].erase(0, 1);
        }
        break;
    }
  }
  std::string text;
  for (const auto& t : tokens) text += t;
  return keep_invalid_bytes || utf8::is_valid(text) ? text : utf8::repair(text);
}

}  // namespace pagoda
