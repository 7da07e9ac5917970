// Fuzz target: a Jinja chat template (the parser, then the evaluator over a fixed conversation with
// tools and a list-of-parts message). Templates come from model files and --chat-template; requests only
// choose the messages and chat_template_kwargs. Output larger than 1 MB is dropped by the fuzzer's
// memory limit only if the evaluator fails to bound it, which is a finding.
#include <nlohmann/json.hpp>

#include "pagoda/core/error.h"
#include "pagoda/tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image"}]},
    {"role": "assistant", "content": "Hello!", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]},
    {"role": "tool", "content": "42"},
    {"role": "user", "content": "Bye"}])");
  static const nlohmann::ordered_json extra = nlohmann::ordered_json::parse(
      R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}], "date_string": "1 Dec 2026"})");
  try {
    const pagoda::ChatTemplate t(std::string(reinterpret_cast<const char*>(data), size), "<s>", "</s>");
    (void)t.render(pagoda::ChatTemplateInputs{messages, true, extra});
  } catch (const pagoda::Error&) {
  } catch (const pagoda::InvalidRequest&) {
  }
  return 0;
}
