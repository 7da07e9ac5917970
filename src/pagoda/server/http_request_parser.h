// parse_http_request: the server's own request parsing (Beast's parser with the server's header and body
// limits) over one complete buffer. For the fuzzer and tests; connections parse the same way as bytes
// arrive (http_server.cpp).
#pragma once

#include <optional>
#include <string_view>

#include "pagoda/server/exchange.h"

namespace pagoda::server {

// The request, or nullopt when it is malformed, incomplete or over a limit.
std::optional<HttpRequest> parse_http_request(std::string_view bytes, size_t body_limit);

}  // namespace pagoda::server
