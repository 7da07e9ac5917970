// jinja lexer: text/tag splitting with jinja2's whitespace control, and the expression tokens inside tags.
#include "pagoda/tokenizer/jinja_lexer.h"

#include <algorithm>
#include <cctype>

#include "pagoda/core/error.h"
#include "pagoda/tokenizer/utf8.h"

namespace pagoda::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

class Lexer {
 public:
  Lexer(std::string src, const std::string& source) : src_(std::move(src)), source_(source) {}

  std::vector<Token> run() {
    bool strip_leading = false;  // the previous tag ended with "-": drop whitespace before the next text
    bool raw_mode = false;
    while (pos_ < src_.size()) {
      size_t tag = raw_mode ? find_endraw(pos_) : find_tag(pos_);
      size_t text_end = tag == std::string::npos ? src_.size() : tag;
      std::string text = src_.substr(pos_, text_end - pos_);
      int text_line = line_;
      bool line_starting = pos_ == 0 || src_[pos_ - 1] == '\n';
      line_ += static_cast<int>(std::count(text.begin(), text.end(), '\n'));
      if (strip_leading) {
        size_t i = 0;
        while (i < text.size() && is_space(text[i])) ++i;
        text.erase(0, i);
        line_starting = false;
      }
      strip_leading = false;
      if (tag == std::string::npos) {
        emit_text(std::move(text), text_line);
        break;
      }
      char kind = src_[tag + 1];
      char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (modifier == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (kind != '{' && modifier != '+') {
        // lstrip_blocks: a block or comment tag alone on its line takes the indentation with it.
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting) &&
            std::all_of(text.begin() + static_cast<long>(l_pos), text.end(), is_space)) {
          text.resize(l_pos);
        }
      }
      emit_text(std::move(text), text_line);
      pos_ = tag + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
      if (kind == '#') {
        strip_leading = lex_comment();
      } else {
        strip_leading = lex_tag(kind == '%');
        raw_mode = kind == '%' && is_raw_block();
      }
    }
    tokens_.push_back({TokenType::kEof, "", line_});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(int line, const std::string& msg) const {
    throw Error(source_ + ":" + std::to_string(line) + ": " + msg);
  }

  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  // Inside {% raw %}, only {% endraw %} (with optional modifiers) ends the text.
  size_t find_endraw(size_t from) const {
    for (size_t i = src_.find("{%", from); i != std::string::npos; i = src_.find("{%", i + 1)) {
      size_t j = i + 2;
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) ++j;
      while (j < src_.size() && is_space(src_[j])) ++j;
      if (src_.compare(j, 6, "endraw") == 0) return i;
    }
    fail(line_, "missing end of raw directive");
  }

  bool is_raw_block() const {
    size_t n = tokens_.size();
    return n >= 3 && tokens_[n - 1].type == TokenType::kBlockEnd && tokens_[n - 2].type == TokenType::kName &&
           tokens_[n - 2].text == "raw" && tokens_[n - 3].type == TokenType::kBlockBegin;
  }

  void emit_text(std::string text, int line) {
    if (!text.empty()) tokens_.push_back({TokenType::kText, std::move(text), line});
  }

  // After a block or comment end: "-" strips following whitespace; otherwise trim_blocks drops one newline
  // unless "+" asked to keep it. Returns whether to strip.
  bool finish_tag(bool modifier_minus, bool modifier_plus, bool trims) {
    if (modifier_minus) return true;
    if (trims && !modifier_plus && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
    }
    return false;
  }

  bool lex_comment() {
    int start_line = line_;
    size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail(start_line, "missing end of comment tag");
    line_ += static_cast<int>(std::count(src_.begin() + static_cast<long>(pos_), src_.begin() + static_cast<long>(end), '\n'));
    bool minus = end > pos_ && src_[end - 1] == '-';
    bool plus = end > pos_ && src_[end - 1] == '+';
    pos_ = end + 2;
    return finish_tag(minus, plus, true);
  }

  bool lex_tag(bool block) {
    tokens_.push_back({block ? TokenType::kBlockBegin : TokenType::kVarBegin, "", line_});
    const char* close = block ? "%}" : "}}";
    int depth = 0;
    int start_line = line_;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= src_.size()) fail(start_line, std::string("unexpected end of template, expected '") + close + "'");
      if (depth == 0) {
        for (char m : {'-', '+', '\0'}) {
          size_t at = pos_ + (m ? 1 : 0);
          if ((!m || src_[pos_] == m) && src_.compare(at, 2, close) == 0) {
            pos_ = at + 2;
            tokens_.push_back({block ? TokenType::kBlockEnd : TokenType::kVarEnd, "", line_});
            return finish_tag(m == '-', m == '+', block);
          }
        }
      }
      char c = src_[pos_];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t s = pos_;
        while (pos_ < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
        tokens_.push_back({TokenType::kName, src_.substr(s, pos_ - s), line_});
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        lex_number();
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        lex_operator(depth);
      }
    }
  }

  void lex_number() {
    auto digits = [&] {
      while (pos_ < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
    };
    size_t s = pos_;
    bool is_float = false;
    digits();
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
      is_float = true;
      ++pos_;
      digits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t e = pos_ + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) {
        is_float = true;
        pos_ = e;
        digits();
      }
    }
    std::string text = src_.substr(s, pos_ - s);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    tokens_.push_back({is_float ? TokenType::kFloat : TokenType::kInt, text, line_});
  }

  // Python string-literal escapes (jinja2 decodes them with "unicode-escape").
  void lex_string(char quote) {
    int start_line = line_;
    std::string value;
    ++pos_;
    while (true) {
      if (pos_ >= src_.size()) fail(start_line, "unexpected end of string");
      char c = src_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\' || pos_ >= src_.size()) {
        value += c;
        continue;
      }
      char e = src_[pos_++];
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '0': value += '\0'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case '\\': case '\'': case '"': value += e; break;
        case '\n': ++line_; break;  // line continuation
        case 'x': case 'u': case 'U': {
          size_t width = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          // As Python: exactly `width` hex digits, and a code point that exists.
          uint32_t cp = 0;
          for (size_t i = 0; i < width; ++i) {
            const char h = pos_ + i < src_.size() ? src_[pos_ + i] : '\0';
            const int digit = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (digit < 0) fail(line_, "truncated \\" + std::string(1, e) + " escape");
            cp = cp * 16 + static_cast<uint32_t>(digit);
          }
          if (cp > 0x10FFFF) fail(line_, "illegal Unicode character in a \\U escape");
          pos_ += width;
          utf8::append_code_point(value, cp);
          break;
        }
        default: value += '\\'; value += e;  // unknown escapes stay as written, as in Python
      }
    }
    tokens_.push_back({TokenType::kString, std::move(value), start_line});
  }

  void lex_operator(int& depth) {
    static const char* kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        tokens_.push_back({TokenType::kOp, op, line_});
        pos_ += 2;
        return;
      }
    }
    char c = src_[pos_];
    if (std::string("+-*/%~<>=()[]{}.,:|").find(c) == std::string::npos) {
      fail(line_, std::string("unexpected char '") + c + "'");
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') {
      if (depth == 0) fail(line_, std::string("unexpected '") + c + "'");
      --depth;
    }
    tokens_.push_back({TokenType::kOp, std::string(1, c), line_});
    ++pos_;
  }

  std::string src_;
  const std::string& source_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(const std::string& template_text, const std::string& source) {
  // jinja2 normalises newlines to "\n" and (keep_trailing_newline=False) drops one final newline.
  std::string src;
  src.reserve(template_text.size());
  for (size_t i = 0; i < template_text.size(); ++i) {
    if (template_text[i] == '\r') {
      src += '\n';
      if (i + 1 < template_text.size() && template_text[i + 1] == '\n') ++i;
    } else {
      src += template_text[i];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  return Lexer(std::move(src), source).run();
}

}  // namespace pagoda::jinja
