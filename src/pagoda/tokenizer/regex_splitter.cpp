// PCRE2-backed pre-tokenizer splitting (see regex_splitter.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "pagoda/tokenizer/regex_splitter.h"

#include <pcre2.h>

#include "pagoda/core/error.h"
#include "pagoda/tokenizer/utf8.h"

namespace pagoda {

struct RegexSplitter::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {
// Match data and a JIT stack per thread: the compiled pattern is shared, these are not. The default
// 32 KiB JIT stack is too small for long runs of whitespace against the look-ahead alternatives.
struct ThreadMatchState {
  pcre2_match_data* data = pcre2_match_data_create(4, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  ThreadMatchState() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~ThreadMatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};
}  // namespace

RegexSplitter::RegexSplitter(std::string_view pattern) : pattern_(pattern), code_(std::make_unique<Code>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                              PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw Error(std::string("bad pre-tokenizer regex at offset ") + std::to_string(offset) + ": " +
                reinterpret_cast<const char*>(message));
  }
  pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is missing
}

RegexSplitter::~RegexSplitter() = default;

void RegexSplitter::split(std::string_view text, std::vector<std::string_view>& out) const {
  thread_local ThreadMatchState state;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0, gap_begin = 0;
  while (pos < text.size()) {
    int rc = pcre2_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, state.data, state.context);
    if (rc < 0) {
      if (rc == PCRE2_ERROR_NOMATCH) break;
      throw Error("pre-tokenizer regex match failed (PCRE2 error " + std::to_string(rc) + ")");
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(state.data);
    size_t begin = ov[0], end = ov[1];
    if (end == begin) {  // an empty match splits nothing; step over one character
      pos = begin + utf8::char_length(text, begin);
      continue;
    }
    if (begin > gap_begin) out.push_back(text.substr(gap_begin, begin - gap_begin));
    out.push_back(text.substr(begin, end - begin));
    pos = gap_begin = end;
  }
  if (gap_begin < text.size()) out.push_back(text.substr(gap_begin));
}

}  // namespace pagoda
