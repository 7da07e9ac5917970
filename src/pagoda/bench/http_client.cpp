// The Beast side of the benchmark client: resolving once, a pool of keep-alive connections, whole and
// streamed responses (chunked bodies are read through the parser's chunk callback, so each piece is
// timed when it arrives).
#include "pagoda/bench/http_client.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <limits>
#include <optional>

namespace pagoda::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

bool closed_by_peer(const boost::system::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe;
}

}  // namespace

std::string HttpResult::describe() const {
  if (!error.empty()) return error;
  std::string message = body.substr(0, 300);
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("error")) {
    const auto& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) message = e["message"].get<std::string>();
    else if (e.is_string()) message = e.get<std::string>();
  } else if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    message = j["message"].get<std::string>();
  }
  return fmt::format("HTTP {}: {}", status, message);
}

struct HttpClient::Impl {
  asio::any_io_executor executor;
  BaseUrl url;
  Headers headers;
  std::chrono::milliseconds timeout;
  std::optional<tcp::resolver::results_type> endpoints;
  std::vector<std::unique_ptr<beast::tcp_stream>> idle;
  int opened = 0;

  std::string where() const { return url.to_string(); }

  asio::awaitable<std::unique_ptr<beast::tcp_stream>> open(std::string& error) {
    if (!endpoints) {
      tcp::resolver resolver(executor);
      auto [ec, results] = co_await resolver.async_resolve(url.host, url.port, asio::as_tuple(asio::use_awaitable));
      if (ec) {
        error = fmt::format("cannot resolve {}: {}", url.host, ec.message());
        co_return nullptr;
      }
      endpoints = results;
    }
    auto stream = std::make_unique<beast::tcp_stream>(executor);
    stream->expires_after(timeout);
    auto [ec, ep] = co_await stream->async_connect(*endpoints, asio::as_tuple(asio::use_awaitable));
    if (ec) {
      error = fmt::format("cannot connect to {}: {}", where(), ec == beast::error::timeout ? "timed out" : ec.message());
      co_return nullptr;
    }
    stream->socket().set_option(tcp::no_delay(true), ec);
    ++opened;
    co_return stream;
  }

  asio::awaitable<HttpResult> exchange(const std::string& method, const std::string& endpoint, const std::string& body,
                                       const OnBytes* on_bytes, const Headers& own = {}) {
    for (int attempt = 0;; ++attempt) {
      const bool reused = !idle.empty() && attempt == 0;
      std::unique_ptr<beast::tcp_stream> s;
      if (reused) {
        s = std::move(idle.back());
        idle.pop_back();
      } else {
        std::string error;
        s = co_await open(error);
        if (!s) co_return HttpResult{0, "", error};
      }
      http::request<http::string_body> req{http::string_to_verb(method), url.target(endpoint), 11};
      req.set(http::field::host, url.host + ":" + url.port);
      req.set(http::field::user_agent, "pagoda-bench");
      if (!body.empty()) req.set(http::field::content_type, "application/json");
      if (on_bytes) req.set(http::field::accept, "text/event-stream");
      for (const auto& [name, value] : headers) req.set(name, value);
      for (const auto& [name, value] : own) req.set(name, value);
      req.body() = body;
      req.keep_alive(true);
      req.prepare_payload();
      s->expires_after(timeout);
      auto [wec, wn] = co_await http::async_write(*s, req, asio::as_tuple(asio::use_awaitable));
      (void)wn;
      if (wec) {
        if (reused && closed_by_peer(wec)) continue;
        co_return HttpResult{0, "", fmt::format("sending to {}: {}", where(), wec.message())};
      }
      beast::flat_buffer buffer;
      http::response_parser<http::string_body> parser;
      parser.body_limit(std::numeric_limits<std::uint64_t>::max());
      s->expires_after(timeout);
      auto [hec, hn] = co_await http::async_read_header(*s, buffer, parser, asio::as_tuple(asio::use_awaitable));
      (void)hn;
      if (hec) {
        if (reused && closed_by_peer(hec)) continue;  // a keep-alive connection the server had closed
        co_return HttpResult{0, "", fmt::format("no response from {}: {}", where(),
                                                hec == beast::error::timeout ? "timed out" : hec.message())};
      }
      HttpResult r;
      r.status = static_cast<int>(parser.get().result_int());
      const bool streaming = on_bytes != nullptr && r.status == 200;
      const bool chunked = parser.chunked();
      auto on_chunk = [on_bytes](std::uint64_t, beast::string_view data, boost::system::error_code&) -> std::size_t {
        (*on_bytes)(std::string_view(data.data(), data.size()), Clock::now());
        return data.size();
      };
      if (streaming && chunked) parser.on_chunk_body(on_chunk);
      while (!parser.is_done()) {
        s->expires_after(timeout);
        auto [rec, rn] = co_await http::async_read_some(*s, buffer, parser, asio::as_tuple(asio::use_awaitable));
        (void)rn;
        if (rec) {
          r.error = fmt::format("reading the response from {}: {}", where(),
                                rec == beast::error::timeout ? "timed out" : rec.message());
          co_return r;
        }
      }
      if (streaming && !chunked) {
        (*on_bytes)(parser.get().body(), Clock::now());
      } else if (!streaming) {
        r.body = std::move(parser.get().body());
      }
      if (parser.get().keep_alive()) idle.push_back(std::move(s));
      co_return r;
    }
  }
};

HttpClient::HttpClient(asio::any_io_executor executor, BaseUrl url, Headers headers, double timeout_s)
    : impl_(std::make_unique<Impl>()) {
  impl_->executor = std::move(executor);
  impl_->url = std::move(url);
  impl_->headers = std::move(headers);
  impl_->timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
}

HttpClient::~HttpClient() = default;

asio::awaitable<HttpResult> HttpClient::request(std::string method, std::string endpoint, std::string body) {
  co_return co_await impl_->exchange(method, endpoint, body, nullptr);
}

asio::awaitable<HttpResult> HttpClient::stream(std::string endpoint, std::string body, OnBytes on_bytes, Headers headers) {
  co_return co_await impl_->exchange("POST", endpoint, body, &on_bytes, headers);
}

const BaseUrl& HttpClient::url() const { return impl_->url; }
int HttpClient::connections_opened() const { return impl_->opened; }

BlockingHttpClient::BlockingHttpClient(BaseUrl url, Headers headers, double timeout_s)
    : client_(std::make_unique<HttpClient>(ioc_.get_executor(), std::move(url), std::move(headers), timeout_s)) {}

BlockingHttpClient::~BlockingHttpClient() {
  client_.reset();  // connections close before the context goes
}

HttpResult BlockingHttpClient::request(const std::string& method, const std::string& endpoint, const std::string& body) {
  HttpResult result;
  asio::co_spawn(
      ioc_, [&]() -> asio::awaitable<void> { result = co_await client_->request(method, endpoint, body); }, asio::detached);
  ioc_.restart();
  ioc_.run();
  return result;
}

}  // namespace pagoda::bench
