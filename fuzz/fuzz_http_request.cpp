// Fuzz target: raw bytes through the server's HTTP request reading (Beast's parser with the server's limits,
// its framing rules, pipelined requests while each keeps the connection alive), then the handler's view of
// each request.
#include <string_view>

#include "pagoda/server/http_request_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto requests = pagoda::server::parse_http_requests(
      std::string_view(reinterpret_cast<const char*>(data), size), /*body_limit=*/1 << 20);
  for (const auto& request : requests) (void)request.path();
  return 0;
}
