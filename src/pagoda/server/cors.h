// Cross-origin requests from browsers (CORS), as vLLM serves them: its --allowed-origins, --allowed-methods,
// --allowed-headers and --allow-credentials, with the defaults and answers of Starlette's CORSMiddleware
// (any origin, method and header; no credentials). A preflight (OPTIONS with Origin and
// Access-Control-Request-Method) is answered by the HTTP layer without reaching the API or its keys; every
// other response to a request that carries an allowed Origin gets Access-Control-Allow-Origin.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pagoda/server/exchange.h"

namespace pagoda::server {

struct CorsPolicy {
  std::vector<std::string> origins{"*"};  // "*": any origin
  std::vector<std::string> methods{"*"};  // "*": any method
  std::vector<std::string> headers{"*"};  // "*": any request header
  bool credentials = false;               // Access-Control-Allow-Credentials: true

  bool allows_origin(std::string_view origin) const;
};

// Parses a flag's value: a JSON list of strings (vLLM's form, '["https://a.example"]') or a comma-separated
// list. Throws pagoda::Error naming `flag` on anything else.
std::vector<std::string> parse_cors_list(const std::string& flag, const std::string& value);

// Whether the request is a CORS preflight.
bool is_cors_preflight(const HttpRequest& request);
// The answer to a preflight: 200 with the allowed origin, methods and headers, or 400 naming what is not allowed.
HttpResponse cors_preflight_response(const CorsPolicy& policy, const HttpRequest& request);
// Headers to add to the response of a request (none without an Origin, or for an origin not allowed).
std::vector<std::pair<std::string, std::string>> cors_response_headers(const CorsPolicy& policy, const HttpRequest& request);

}  // namespace pagoda::server
