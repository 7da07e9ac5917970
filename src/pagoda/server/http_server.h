// HttpServer: HTTP/1.1 over Boost.Beast and Asio C++20 coroutines. A few I/O threads serve every
// connection (keep-alive, body limit, idle timeout); each request becomes an Exchange for the handler.
// run() blocks until SIGINT/SIGTERM, then drains: stop accepting, let in-flight exchanges finish until
// the deadline, cancel the rest, return.
#pragma once

#include <functional>

#include <memory>
#include <optional>
#include <string>

#include "pagoda/server/cors.h"
#include "pagoda/server/exchange.h"

namespace pagoda::server {

struct HttpServerOptions {
  std::string host = "0.0.0.0";
  int port = 8000;
  int num_threads = 2;
  size_t body_limit = 16 * 1024 * 1024;
  int idle_timeout_s = 60;      // keep-alive connections with no request; also a request's read time
  int write_timeout_s = 60;     // a client that stops reading
  // A stream's events the client has not taken yet, at most: past it the client is too slow (or not reading),
  // and its requests are cancelled and the connection closed, as for one that left.
  size_t max_unwritten_stream_bytes = 16 * 1024 * 1024;
  double shutdown_deadline_s = 10;  // time in-flight requests get to finish after a signal
  int max_connections_per_client = 2048;  // open connections from one address; more get 429 and are closed (0: no limit)
  CorsPolicy cors;  // browsers' cross-origin requests (cors.h)
  // Called (on an I/O thread) with the seconds from a streamed write's produced_at to its bytes being
  // written to the socket: the server's own overhead per token. Unset: not measured.
  std::function<void(double)> on_stream_delivery;
  // Called on an I/O thread with the method, target and headers (no body) of a request with a body, before the body
  // is read (CORS preflights included): a response refuses the request at once and the connection closes, the body
  // unread (an unauthenticated client must not make the server hold --max-request-body bytes). Unset, or no
  // response: the request is read whole.
  std::function<std::optional<HttpResponse>(const HttpRequest& head)> screen;
};

class HttpServer {
 public:
  HttpServer(const HttpServerOptions& options, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds now (throws pagoda::Error when the address is unusable) so errors show before run().
  int bound_port() const;
  // Serves until SIGINT/SIGTERM (or stop()), drains, returns.
  void run();
  // Thread-safe: begins the same graceful shutdown a signal does.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::server
