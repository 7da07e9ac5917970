#include "pagoda/server/http_request_parser.h"

#include <boost/asio/buffer.hpp>

#include "pagoda/server/beast_request.h"

namespace pagoda::server {

std::optional<HttpRequest> parse_http_request(std::string_view bytes, size_t body_limit) {
  namespace http = boost::beast::http;
  http::request_parser<http::string_body> parser;
  beast_request::configure(parser, body_limit);
  parser.eager(true);
  boost::beast::error_code ec;
  while (!parser.is_done() && !bytes.empty()) {
    const size_t used = parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
    if (ec == http::error::need_more) break;
    if (ec) return std::nullopt;
    if (used == 0) break;
    bytes.remove_prefix(used);
  }
  if (!parser.is_done()) {
    parser.put_eof(ec);
    if (ec || !parser.is_done()) return std::nullopt;
  }
  return beast_request::to_http_request(parser.get());
}

}  // namespace pagoda::server
