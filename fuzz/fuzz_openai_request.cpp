// Fuzz target: an OpenAI request body through the server's parsing and validation (completions, chat
// completions with its chat options, and the bare JSON-object parse of /tokenize and /detokenize). The
// first byte picks the endpoint; anything but a clean ApiError is a finding.
#include <string>

#include "pagoda/core/error.h"
#include "pagoda/server/api_error.h"
#include "pagoda/server/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 3) {
      case 0:
        (void)pagoda::server::parse_completion_request(body);
        break;
      case 1:
        (void)pagoda::server::parse_chat_request(body);
        break;
      default:
        (void)pagoda::server::parse_chat_options(pagoda::server::parse_json_object(body));
    }
  } catch (const pagoda::server::ApiError&) {
  } catch (const pagoda::InvalidRequest&) {
  }
  return 0;
}
