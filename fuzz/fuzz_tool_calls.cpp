// Fuzz target: a model's output text through the tool-call formats (toolcall/), whole and streamed. The first
// byte picks the format, the second seeds where the stream is cut. Model output is shaped by whoever writes
// the prompt, so every format must take any bytes: a crash, a whole-text call whose arguments are not a JSON
// object (but for one cut off at the end of the output), or a stream whose deltas do not add up to the whole-text
// result (content, names, arguments), is a finding.
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "pagoda/toolcall/tool_call_parser.h"

namespace {

std::unique_ptr<pagoda::toolcall::ToolCallFormat> pick(uint8_t b) {
  using namespace pagoda::toolcall;
  switch (b % 5) {
    case 0:
      return llama3_json_format();
    case 1:
      return hermes_format();
    case 2:
      return mistral_format();
    case 3:
      return required_calls_format();
    default:
      return named_function_format("f");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const auto format = pick(data[0]);
  const bool named = data[0] % 5 == 4;
  const std::string text(reinterpret_cast<const char*>(data) + 2, size - 2);
  const pagoda::toolcall::ParsedOutput whole = pagoda::toolcall::parse_tool_calls(*format, text);
  // Every call's arguments are a JSON object, but the last one's when the output was cut off inside it (and a
  // named function's, which are the text as written).
  const size_t whole_calls = whole.tool_calls.size() - (whole.cut_off ? 1 : 0);
  for (size_t i = 0; i < whole_calls && !named; ++i) {
    const auto args = nlohmann::json::parse(whole.tool_calls[i].arguments, nullptr, /*allow_exceptions=*/false);
    if (!args.is_object()) std::abort();
  }
  pagoda::toolcall::ToolCallStream stream(*format);
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  const auto take = [&](const std::vector<pagoda::toolcall::OutputDelta>& deltas) {
    for (const auto& d : deltas) {
      if (!d.tool_call) {
        content += d.content;
      } else if (d.tool_call->name) {
        if (d.tool_call->index != static_cast<int>(calls.size())) std::abort();
        calls.emplace_back(*d.tool_call->name, d.tool_call->arguments);
      } else {
        if (d.tool_call->index < 0 || d.tool_call->index >= static_cast<int>(calls.size())) std::abort();
        calls[d.tool_call->index].second += d.tool_call->arguments;
      }
    }
  };
  std::mt19937 rng(data[1]);
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t n = 1 + rng() % 8;
    take(stream.push(std::string_view(text).substr(pos, n)));
    pos += n;
  }
  take(stream.finish());
  if (content != whole.content || calls.size() != whole.tool_calls.size()) std::abort();
  for (size_t i = 0; i < calls.size(); ++i)
    if (calls[i].first != whole.tool_calls[i].name || calls[i].second != whole.tool_calls[i].arguments) std::abort();
  return 0;
}
