// Fuzz target: raw bytes through the server's HTTP request parsing (Beast's parser with the server's
// limits, then the handler's HttpRequest).
#include <string_view>

#include "pagoda/server/http_request_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto request = pagoda::server::parse_http_request(
      std::string_view(reinterpret_cast<const char*>(data), size), /*body_limit=*/1 << 20);
  if (request) (void)request->path();
  return 0;
}
