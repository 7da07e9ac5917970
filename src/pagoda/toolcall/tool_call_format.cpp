// The parser registry and the call ids (tool_call_format.h).
#include "pagoda/toolcall/tool_call_format.h"

#include <fmt/format.h>

#include <random>
#include <stdexcept>

namespace pagoda::toolcall {

std::string ToolCallFormat::new_call_id() const {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("chatcmpl-tool-{:016x}{:016x}", rng(), rng());
}

bool is_tool_call_parser(std::string_view parser) {
  return parser == "llama3_json" || parser == "hermes" || parser == "mistral";
}

std::unique_ptr<ToolCallFormat> make_tool_call_format(std::string_view parser) {
  if (parser == "llama3_json") return llama3_json_format();
  if (parser == "hermes") return hermes_format();
  if (parser == "mistral") return mistral_format();
  throw std::invalid_argument(fmt::format("unknown tool-call parser '{}' (known: {})", parser, kToolCallParsers));
}

}  // namespace pagoda::toolcall
