// How the HTTP layer reads a request with Beast: the parser's limits and the handler's HttpRequest made
// from the parsed message. Included only by http_server.cpp and http_request_parser.cpp.
#pragma once

#include <boost/beast/http.hpp>

#include <cctype>
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

}  // namespace pagoda::server::beast_request
