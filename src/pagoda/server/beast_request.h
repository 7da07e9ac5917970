// How the HTTP layer reads a request with Beast: the parser's limits and the handler's HttpRequest made
// from the parsed message. Included only by http_server.cpp and http_request_parser.cpp.
#pragma once

#include <boost/beast/http.hpp>

#include <cctype>
#include <optional>
#include <string>

#include "pagoda/server/exchange.h"

namespace pagoda::server::beast_request {

namespace http = boost::beast::http;

inline constexpr size_t kHeaderLimit = 64 * 1024;

inline void configure(http::request_parser<http::string_body>& parser, size_t body_limit) {
  parser.body_limit(body_limit);
  parser.header_limit(kHeaderLimit);
}

// A request's method, target and headers (names lower-cased), without its body: what is known once the header
// has been read (HttpServerOptions::screen).
inline HttpRequest head_of(const http::request<http::string_body>& msg) {
  HttpRequest request;
  request.method = std::string(msg.method_string());
  request.target = std::string(msg.target());
  for (const auto& field : msg) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    request.headers[name] = std::string(field.value());
  }
  return request;
}

// The handler's view of a parsed request: head_of, and the body moved out.
inline HttpRequest to_http_request(http::request<http::string_body>& msg) {
  HttpRequest request = head_of(msg);
  request.body = std::move(msg.body());
  return request;
}

// Framing the RFCs make an error (RFC 9112 3.2, 6.1): an HTTP/1.1 request without exactly one Host, and a
// transfer coding other than chunked alone (gzip and the like would be ignored, the body misread). Two
// Authorization headers are ambiguous too (RFC 9110 5.3: it is not a list): which key is meant?
struct FramingRefusal {
  http::status status;
  const char* message;
};
inline std::optional<FramingRefusal> framing_refusal(const http::request<http::string_body>& msg) {
  const size_t te_headers = msg.count(http::field::transfer_encoding);
  if (te_headers > 1 || (te_headers == 1 && !boost::beast::iequals(msg[http::field::transfer_encoding], "chunked")))
    return FramingRefusal{http::status::not_implemented, "only the chunked transfer coding is implemented"};
  if (msg.version() >= 11 && msg.count(http::field::host) != 1)
    return FramingRefusal{http::status::bad_request, "an HTTP/1.1 request needs exactly one Host header"};
  if (msg.count(http::field::authorization) > 1)
    return FramingRefusal{http::status::bad_request, "a request may carry one Authorization header"};
  return std::nullopt;
}

}  // namespace pagoda::server::beast_request
