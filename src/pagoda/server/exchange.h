// The HTTP layer's contract with request handlers, free of Boost: a parsed request, a complete response,
// and Exchange, one request/response pair that a handler answers at once or later, whole or streamed.
#pragma once

#include <chrono>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace pagoda::server {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query, e.g. "/v1/completions"
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string client;  // the peer's address ("127.0.0.1"); empty when unknown

  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? "" : it->second;
  }
  std::string path() const { return target.substr(0, target.find('?')); }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (e.g. Retry-After)
};

// One exchange. Unless noted, methods must be called on the exchange's strand: in the handler itself or
// in a function passed to post(). The HTTP layer owns delivery; handlers never block.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual const HttpRequest& request() const = 0;

  // Ends the exchange with a complete response. Later calls are ignored.
  virtual void respond(HttpResponse response) = 0;
  // Streaming: a header (chunked transfer), any number of writes, then end_stream().
  virtual void begin_stream(int status, const std::string& content_type) = 0;
  // `produced_at`: when the data's content (a token) was produced by the engine; the HTTP layer reports
  // the time until the bytes are written (HttpServerOptions::on_stream_delivery). Default: not timed.
  virtual void write(std::string data, std::chrono::steady_clock::time_point produced_at = {}) = 0;
  virtual void end_stream() = 0;

  // `fn` runs (on the strand) when the client goes away or the server gives up waiting at shutdown,
  // unless the exchange has ended. Handlers cancel their engine requests there and still end the exchange.
  virtual void on_cancel(std::function<void()> fn) = 0;
  virtual bool cancelled() const = 0;  // thread-safe (a worker may skip a request whose client has gone)

  // Thread-safe: runs `fn` on the exchange's strand (e.g. from the engine thread). Never blocks.
  virtual void post(std::function<void()> fn) = 0;

  // Extra fields for this exchange's access-log line ("id=... tenant=... tokens=...").
  std::string log_note;
};

using Handler = std::function<void(std::shared_ptr<Exchange>)>;

}  // namespace pagoda::server
