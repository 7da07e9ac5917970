// parse_http_requests: the server's own request reading over one complete buffer, for the fuzzer and tests:
// Beast's parser with the server's header and body limits, the framing rules it refuses
// (beast_request::framing_refusal), and pipelined requests read one after another while each keeps the
// connection alive. Connections read the same way as bytes arrive (http_server.cpp).
#pragma once

#include <string_view>
#include <vector>

#include "pagoda/server/exchange.h"

namespace pagoda::server {

// The requests the server would hand its handler, in order: it stops at the first one that is malformed,
// incomplete, over a limit or refused by the framing rules, and after one that closes the connection.
std::vector<HttpRequest> parse_http_requests(std::string_view bytes, size_t body_limit);

}  // namespace pagoda::server
