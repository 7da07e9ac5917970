// HttpClient: the benchmark's HTTP/1.1 client, Beast over Asio C++20 coroutines on one thread. Keep-alive
// connections are pooled and reused (a reused connection the server closed meanwhile is retried once on a
// fresh one); set-up calls get whole responses; streamed responses are handed over chunk by chunk with the
// time each arrived. BlockingHttpClient runs single calls to completion for the set-up phase.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pagoda/bench/url.h"

namespace pagoda::bench {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpResult {
  int status = 0;     // 0: no response
  std::string body;   // the body (streamed requests: only when status != 200)
  std::string error;  // a transport failure: no connection, a timeout, a connection cut mid-body

  bool ok() const { return error.empty() && status == 200; }
  // "HTTP 404: <the error message of the body>" or the transport error.
  std::string describe() const;
};

class HttpClient {
 public:
  using Clock = std::chrono::steady_clock;
  using OnBytes = std::function<void(std::string_view bytes, Clock::time_point arrived)>;

  // `timeout_s`: the longest wait for connecting, writing, or the next bytes of a response.
  HttpClient(boost::asio::any_io_executor executor, BaseUrl url, Headers headers, double timeout_s);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  boost::asio::awaitable<HttpResult> request(std::string method, std::string endpoint, std::string body);
  // POST `body` (JSON); a 200 response's body goes to `on_bytes` as it arrives, chunk by chunk. `headers`:
  // this request's own, set after (over) the client's.
  boost::asio::awaitable<HttpResult> stream(std::string endpoint, std::string body, OnBytes on_bytes,
                                            Headers headers = {});

  const BaseUrl& url() const;
  int connections_opened() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class BlockingHttpClient {
 public:
  BlockingHttpClient(BaseUrl url, Headers headers, double timeout_s);
  ~BlockingHttpClient();
  HttpResult request(const std::string& method, const std::string& endpoint, const std::string& body = "");

 private:
  boost::asio::io_context ioc_;
  std::unique_ptr<HttpClient> client_;
};

}  // namespace pagoda::bench
