#include "pagoda/server/http_request_parser.h"

#include <boost/asio/buffer.hpp>

#include <optional>

#include "pagoda/server/beast_request.h"

namespace pagoda::server {
namespace {

namespace http = boost::beast::http;

// One request from the front of `bytes` (consumed), or nullopt when it is malformed, incomplete or over a limit.
std::optional<http::request<http::string_body>> parse_one(std::string_view& bytes, size_t body_limit) {
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
  return parser.release();
}

}  // namespace

std::vector<HttpRequest> parse_http_requests(std::string_view bytes, size_t body_limit) {
  std::vector<HttpRequest> requests;
  while (!bytes.empty()) {
    std::optional<http::request<http::string_body>> msg = parse_one(bytes, body_limit);
    if (!msg || beast_request::framing_refusal(*msg)) break;
    const bool keep_alive = msg->keep_alive();
    requests.push_back(beast_request::to_http_request(*msg));
    if (!keep_alive) break;
  }
  return requests;
}

}  // namespace pagoda::server
