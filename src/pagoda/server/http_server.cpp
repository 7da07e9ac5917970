// The Beast/Asio HTTP layer. With http_request_parser.cpp the only files that include Beast: connection coroutines, the
// Exchange implementation (a queue drained by the connection, woken through a timer), signals, draining.
#include "pagoda/server/http_server.h"

#include <sys/socket.h>

#include <cerrno>
#include <functional>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "pagoda/core/error.h"
#include "pagoda/core/logging.h"
#include "pagoda/server/beast_request.h"

namespace pagoda::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Strand = asio::strand<asio::io_context::executor_type>;
using Clock = std::chrono::steady_clock;

// What a request gets once the server is shutting down.
HttpResponse shutting_down_response() {
  return HttpResponse{503, "application/json",
                      R"({"error":{"message":"the server is shutting down","type":"server_error","param":null,"code":503}})",
                      {{"Retry-After", "5"}}};
}

class ExchangeImpl : public Exchange, public std::enable_shared_from_this<ExchangeImpl> {
 public:
  enum class Kind { kResponse, kHead, kChunk, kEnd };
  struct Item {
    Kind kind;
    HttpResponse response;  // kResponse; kHead uses status and content_type
    std::string data;       // kChunk
    Clock::time_point produced_at{};  // kChunk: when its earliest token was produced (epoch: not timed)
  };

  ExchangeImpl(Strand strand, HttpRequest request, size_t max_unwritten)
      : strand_(strand), wake_(strand), request_(std::move(request)), max_unwritten_(max_unwritten) {
    wake_.expires_at(asio::steady_timer::time_point::max());
  }

  const HttpRequest& request() const override { return request_; }

  void respond(HttpResponse response) override {
    if (ended_) return;
    ended_ = true;
    if (streaming_) {  // a handler that fails mid-stream: end the stream instead
      push(Item{Kind::kEnd, {}, {}});
      return;
    }
    status_ = response.status;
    push(Item{Kind::kResponse, std::move(response), {}});
  }
  void begin_stream(int status, const std::string& content_type) override {
    if (ended_ || streaming_) return;
    streaming_ = true;
    status_ = status;
    HttpResponse head;
    head.status = status;
    head.content_type = content_type;
    push(Item{Kind::kHead, std::move(head), {}});
  }
  void write(std::string data, Clock::time_point produced_at) override {
    if (ended_ || !streaming_ || data.empty()) return;
    if (!items_.empty() && items_.back().kind == Kind::kChunk) {
      items_.back().data += data;  // coalesce what the connection has not written yet
      if (items_.back().produced_at == Clock::time_point{}) items_.back().produced_at = produced_at;
      // A client that stops reading would have the engine generate for it, and this buffer grow, until the write
      // timeout (10 unread streams of n = 128 with logprobs: +500 MB). Past the bound it is treated as gone.
      if (items_.back().data.size() > max_unwritten_) {
        spdlog::warn("{} {}: the client has not read {} MB of its stream; cancelling it", request_.method,
                     request_.target, items_.back().data.size() >> 20);
        items_.clear();
        client_gone();
        if (abort_io) abort_io();
      }
      return;
    }
    push(Item{Kind::kChunk, {}, std::move(data), produced_at});
  }
  void end_stream() override {
    if (ended_ || !streaming_) return;
    ended_ = true;
    push(Item{Kind::kEnd, {}, {}});
  }
  void on_cancel(std::function<void()> fn) override { on_cancel_ = std::move(fn); }
  bool cancelled() const override { return cancelled_.load(); }
  void post(std::function<void()> fn) override {
    asio::post(strand_, [self = shared_from_this(), fn = std::move(fn)] {
      try {
        fn();
      } catch (const std::exception& e) {
        spdlog::error("request handler failed: {}", e.what());
        self->fail(e.what());
      }
    });
  }

  // Strand only, from the HTTP layer.
  void cancel() {
    if (ended_ || cancelled_) return;
    cancelled_ = true;
    if (on_cancel_) {
      auto fn = std::move(on_cancel_);
      fn();
    }
    wake_.cancel();
  }
  // Shutdown's deadline: a request whose handler has not begun an answer or registered a cancel hook (its body still
  // queued or being parsed on the request threads) gets the 503 a request arriving now would; the rest are
  // cancelled as when a client leaves (a generation then ends with its own "abort" answer).
  void shut_down() {
    const bool answering = ended_ || streaming_ || on_cancel_ != nullptr;
    cancel();
    if (!answering) respond(shutting_down_response());
  }
  void client_gone() {
    gone_ = true;
    cancel();
    wake_.cancel();
  }
  void fail(const std::string& message) {
    if (ended_) return;
    HttpResponse r;
    r.status = 500;
    r.body = nlohmann_error(message);
    respond(std::move(r));
  }
  static std::string nlohmann_error(const std::string& message) {
    std::string escaped;
    for (char c : message) {
      if (c == '"' || c == '\\') escaped += '\\';
      if (static_cast<unsigned char>(c) >= 0x20) escaped += c;
    }
    return "{\"error\":{\"message\":\"" + escaped + "\",\"type\":\"server_error\",\"param\":null,\"code\":500}}";
  }

  Strand strand_;
  asio::steady_timer wake_;
  std::deque<Item> items_;
  bool gone_ = false;
  int status_ = 0;
  std::function<void()> abort_io;  // set by deliver(): ends the connection's pending write

 private:
  void push(Item item) {
    items_.push_back(std::move(item));
    wake_.cancel();
  }

  HttpRequest request_;
  size_t max_unwritten_;
  bool ended_ = false, streaming_ = false;
  std::atomic<bool> cancelled_ = false;  // read by workers too (Exchange::cancelled)
  std::function<void()> on_cancel_;
};

// Closing with unread request bytes makes the kernel send RST, which can destroy the error response we
// just wrote before the client reads it: half-close, then discard input for a moment.
asio::awaitable<void> linger(beast::tcp_stream& stream) {
  boost::system::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream.expires_after(std::chrono::seconds(1));
  std::array<char, 4096> sink;
  for (size_t total = 0; total < (1u << 20);) {
    auto [rec, n] = co_await stream.async_read_some(asio::buffer(sink), asio::as_tuple(asio::use_awaitable));
    if (rec) break;
    total += n;
  }
}

// An answer, then the connection closes (lingering, so that unread request bytes do not reset it first).
asio::awaitable<void> respond_and_close(beast::tcp_stream& stream, const HttpResponse& r, int write_timeout_s) {
  http::response<http::string_body> res{static_cast<http::status>(r.status), 11};
  res.set(http::field::content_type, r.content_type);
  for (const auto& [k, v] : r.headers) res.set(k, v);
  res.body() = r.body;
  res.keep_alive(false);
  res.prepare_payload();
  stream.expires_after(std::chrono::seconds(write_timeout_s));
  co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
  co_await linger(stream);
}

// An OpenAI error object with `status` (an invalid_request_error), then the connection closes: for what is wrong
// with the HTTP itself, before any route sees the request.
asio::awaitable<void> reject_and_close(beast::tcp_stream& stream, http::status status, std::string_view message,
                                       int write_timeout_s) {
  HttpResponse r;
  r.status = static_cast<int>(status);
  r.body = fmt::format(R"({{"error":{{"message":"{}","type":"invalid_request_error","param":null,"code":{}}}}})", message,
                       r.status);
  co_await respond_and_close(stream, r, write_timeout_s);
}

// A client over --max-connections-per-client: one 429 (without reading its request), then the connection closes.
asio::awaitable<void> refuse(beast::tcp_stream stream, int limit) {
  HttpResponse r;
  r.status = 429;
  r.body = fmt::format(
      R"json({{"error":{{"message":"too many connections from this address (the limit is {})","type":"rate_limit_error","param":null,"code":429}}}})json",
      limit);
  r.headers = {{"Retry-After", "1"}};
  co_await respond_and_close(stream, r, 5);
}

// A connection waiting for a request (a new one for its first, a keep-alive one for its next): the first to close
// when file descriptors run out, longest waiting first. Touched on its connection's strand only, except for the
// registry lists (under their mutexes). A request whose header came before shutdown began and whose body is still
// arriving is also listed in HttpServer::Impl::receiving: shutdown waits for it, and at its deadline cuts the read.
struct IdleConnection {
  beast::tcp_stream* stream;
  Strand strand;
  bool waiting = true;  // false once the read finished: the stream may be gone
  bool listed = true;   // in HttpServer::Impl::idle (under idle_mutex)
  bool cut = false;     // shutdown's deadline cancelled the read of its body
};

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  Handler handler;
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  asio::signal_set signals{ioc, SIGINT, SIGTERM};
  std::atomic<bool> draining{false};
  std::atomic<bool> past_deadline{false};  // shutdown's deadline passed: what is not answered yet gets a 503
  std::mutex active_mutex;
  std::list<std::weak_ptr<ExchangeImpl>> active;
  std::atomic<int> num_active{0};
  std::mutex idle_mutex;
  std::list<std::shared_ptr<IdleConnection>> idle;  // waiting for a request, longest first
  std::mutex receiving_mutex;
  // Requests of before shutdown whose body is still arriving, until they are active or answered (in flight).
  std::list<std::shared_ptr<IdleConnection>> receiving;
  std::mutex clients_mutex;
  std::unordered_map<std::string, int> connections_per_client;  // by remote address

  asio::awaitable<void> accept_loop();
  // Closes up to `count` of the connections that have waited longest for a request (each on its own strand).
  void shed_idle_connections(size_t count);
  asio::awaitable<void> session(beast::tcp_stream stream, Strand strand, std::string client);
  // Counts a new connection from `client`; false (and nothing counted) when it already has the maximum.
  bool admit_client(const std::string& client);
  void release_client(const std::string& client);
  // `http_version`: the request's (10 or 11): an HTTP/1.0 client gets a stream unframed, ended by closing.
  asio::awaitable<bool> deliver(beast::tcp_stream& stream, std::shared_ptr<ExchangeImpl> ex, bool keep_alive,
                                unsigned http_version);
  asio::awaitable<void> drain();
  void begin_shutdown();
};

HttpServer::HttpServer(const HttpServerOptions& options, Handler handler) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  impl_->handler = std::move(handler);
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(options.host, ec);
  if (ec) throw Error(fmt::format("--host {}: not an IP address", options.host));
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
  auto& acc = impl_->acceptor;
  acc.open(endpoint.protocol(), ec);
  if (!ec) acc.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acc.bind(endpoint, ec);
  if (!ec) acc.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw Error(fmt::format("cannot listen on {}:{}: {}", options.host, options.port, ec.message()));
}

HttpServer::~HttpServer() = default;

int HttpServer::bound_port() const { return impl_->acceptor.local_endpoint().port(); }

void HttpServer::stop() {
  asio::post(impl_->ioc, [impl = impl_.get()] { impl->begin_shutdown(); });
}

void HttpServer::run() {
  Impl& s = *impl_;
  asio::co_spawn(s.ioc, s.accept_loop(), asio::detached);
  s.signals.async_wait([&s](boost::system::error_code ec, int sig) {
    if (ec) return;
    spdlog::info("received signal {}: shutting down", sig);
    s.begin_shutdown();
  });
  std::vector<std::thread> threads;
  const auto join = [&] {
    for (auto& t : threads) t.join();
  };
  try {
    for (int i = 1; i < std::max(1, s.options.num_threads); ++i) threads.emplace_back([&s] { s.ioc.run(); });
  } catch (...) {  // a thread the system would not create: stop those started, then report it
    s.ioc.stop();
    join();
    throw;
  }
  s.ioc.run();
  join();
}

void HttpServer::Impl::begin_shutdown() {
  if (draining.exchange(true)) return;
  boost::system::error_code ec;
  acceptor.close(ec);
  signals.cancel(ec);
  asio::co_spawn(ioc, drain(), asio::detached);
}

asio::awaitable<void> HttpServer::Impl::drain() {
  asio::steady_timer timer(ioc);
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options.shutdown_deadline_s * 1000));
  const auto num_receiving = [this] {
    std::lock_guard lock(receiving_mutex);
    return receiving.size();
  };
  const auto in_flight = [&] { return num_active.load() + num_receiving(); };
  while (in_flight() > 0 && Clock::now() < deadline) {
    timer.expires_after(std::chrono::milliseconds(20));
    co_await timer.async_wait(asio::use_awaitable);
  }
  past_deadline = true;
  if (const size_t n = num_receiving(); n > 0) {
    spdlog::warn("shutdown deadline reached: answering 503 to {} requests whose body is still arriving", n);
    std::lock_guard lock(receiving_mutex);
    for (const auto& c : receiving)
      asio::post(c->strand, [c] {
        if (!c->waiting) return;
        c->cut = true;
        c->stream->cancel();  // its read ends with operation_aborted and the session answers
      });
  }
  if (num_active.load() > 0) {
    spdlog::warn("shutdown deadline reached: cancelling {} in-flight requests", num_active.load());
    std::lock_guard lock(active_mutex);
    for (auto& weak : active)
      if (auto ex = weak.lock()) asio::post(ex->strand_, [ex] { ex->shut_down(); });
  }
  const auto hard = Clock::now() + std::chrono::seconds(3);
  while (in_flight() > 0 && Clock::now() < hard) {
    timer.expires_after(std::chrono::milliseconds(20));
    co_await timer.async_wait(asio::use_awaitable);
  }
  spdlog::info("server stopped");
  ioc.stop();
}

void HttpServer::Impl::shed_idle_connections(size_t count) {
  std::lock_guard lock(idle_mutex);
  for (; count > 0 && !idle.empty(); --count) {
    std::shared_ptr<IdleConnection> c = std::move(idle.front());
    idle.pop_front();
    c->listed = false;
    asio::post(c->strand, [c] {
      if (!c->waiting) return;
      boost::system::error_code ec;
      c->stream->socket().close(ec);  // its read ends with an error and the session returns
    });
  }
}

asio::awaitable<void> HttpServer::Impl::accept_loop() {
  // Out of file descriptors (EMFILE, ENFILE), accepting again at once fails again at once: close connections
  // waiting for a request, wait (10 ms, doubling to 1 s), and say so once per episode, not per retry.
  const auto kFirstBackoff = std::chrono::milliseconds(10);
  auto backoff = kFirstBackoff;
  int failures = 0;
  asio::steady_timer timer(ioc);
  while (acceptor.is_open()) {
    auto strand = asio::make_strand(ioc);
    tcp::socket socket(strand);
    auto [ec] = co_await acceptor.async_accept(socket, asio::as_tuple(asio::use_awaitable));
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) break;
      const bool out_of_fds = ec == asio::error::no_descriptors || ec.value() == ENFILE;
      if (failures++ == 0)
        spdlog::warn("accept: {}{}; retrying with back-off", ec.message(),
                     out_of_fds ? " (out of file descriptors): closing connections that wait for a request" : "");
      if (out_of_fds) shed_idle_connections(16);
      timer.expires_after(backoff);
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      backoff = std::min<std::chrono::milliseconds>(backoff * 2, std::chrono::seconds(1));
      continue;
    }
    if (failures > 0) spdlog::info("accepting connections again after {} failed attempts", failures);
    failures = 0;
    backoff = kFirstBackoff;
    socket.set_option(tcp::no_delay(true), ec);
    std::string client = socket.remote_endpoint(ec).address().to_string();
    if (!admit_client(client)) {
      asio::co_spawn(strand, refuse(beast::tcp_stream(std::move(socket)), options.max_connections_per_client),
                     asio::detached);
      continue;
    }
    asio::co_spawn(strand, session(beast::tcp_stream(std::move(socket)), strand, std::move(client)), asio::detached);
  }
}

bool HttpServer::Impl::admit_client(const std::string& client) {
  if (options.max_connections_per_client <= 0) return true;
  std::lock_guard lock(clients_mutex);
  int& n = connections_per_client[client];  // only ever at the limit when refused: never a 0 left behind
  if (n >= options.max_connections_per_client) return false;
  ++n;
  return true;
}

void HttpServer::Impl::release_client(const std::string& client) {
  if (options.max_connections_per_client <= 0) return;
  std::lock_guard lock(clients_mutex);
  auto it = connections_per_client.find(client);
  if (it != connections_per_client.end() && --it->second <= 0) connections_per_client.erase(it);
}

asio::awaitable<void> HttpServer::Impl::session(beast::tcp_stream stream, Strand strand, std::string client) {
  struct Release {  // the count is given back however the session ends
    Impl* impl;
    const std::string& client;
    ~Release() { impl->release_client(client); }
  } release{this, client};
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    beast_request::configure(parser, options.body_limit);
    stream.expires_after(std::chrono::seconds(options.idle_timeout_s));
    // Waiting for a request, it may be shed when descriptors run out: kept alive after one, or new (connections that
    // never sent a whole request were not listed, so 250 of them held every descriptor until their read timeout).
    const auto idle_entry = std::make_shared<IdleConnection>(IdleConnection{&stream, strand});
    std::list<std::shared_ptr<IdleConnection>>::iterator idle_at;
    {
      std::lock_guard lock(idle_mutex);
      idle_at = idle.insert(idle.end(), idle_entry);
    }
    // The header first: a client that sent `Expect: 100-continue` waits for the go-ahead before its body (a body
    // over the limit was refused by the header's Content-Length already).
    auto [ec, n] = co_await http::async_read_header(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
    // A request whose header was whole before shutdown began is in flight: it is answered as usual, its body waited
    // for until shutdown's deadline. One that comes later gets the 503.
    const bool before_shutdown = !draining.load();
    struct Receiving {  // its place in `receiving`, left once the request is active or answered, or the session ends
      Impl* impl = nullptr;
      std::list<std::shared_ptr<IdleConnection>>::iterator at;
      void release() {
        if (!impl) return;
        std::lock_guard lock(impl->receiving_mutex);
        impl->receiving.erase(at);
        impl = nullptr;
      }
      ~Receiving() { release(); }
    } receiving_body;
    if (!ec && !parser.is_done() && options.screen) {  // a body follows: refuse what need not be read
      const HttpRequest head = beast_request::head_of(parser.get());
      std::optional<HttpResponse> refusal = options.screen(head);
      if (refusal) {
        for (auto& header : cors_response_headers(options.cors, head)) refusal->headers.push_back(std::move(header));
        co_await respond_and_close(stream, *refusal, options.write_timeout_s);
        spdlog::info("{} {} {} (refused before its body)", head.method, head.target, refusal->status);
        break;
      }
    }
    if (!ec && !parser.is_done()) {
      if (beast::iequals(parser.get()[http::field::expect], "100-continue") && parser.get().version() >= 11) {
        static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        std::tie(ec, std::ignore) =
            co_await asio::async_write(stream, asio::buffer(kContinue), asio::as_tuple(asio::use_awaitable));
      }
      if (!ec && before_shutdown) {
        std::lock_guard lock(receiving_mutex);
        receiving_body.at = receiving.insert(receiving.end(), idle_entry);
        receiving_body.impl = this;
      }
      if (!ec) std::tie(ec, n) = co_await http::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
    }
    (void)n;
    {
      idle_entry->waiting = false;
      std::lock_guard lock(idle_mutex);
      if (idle_entry->listed) idle.erase(idle_at);  // unless shed_idle_connections took it out
    }
    if (idle_entry->cut) {  // its body was still arriving at shutdown's deadline
      co_await respond_and_close(stream, shutting_down_response(), options.write_timeout_s);
      spdlog::info("{} {} 503 (its body was still arriving at the shutdown deadline)",
                   std::string(parser.get().method_string()), std::string(parser.get().target()));
      break;
    }
    if (ec) {
      if (ec == http::error::body_limit || ec == http::error::header_limit) {
        const bool body = ec == http::error::body_limit;
        co_await reject_and_close(stream, body ? http::status::payload_too_large : http::status::request_header_fields_too_large,
                                  body ? "the request body is larger than the limit"
                                       : "the request header is larger than the limit",
                                  options.write_timeout_s);
      } else if (ec != http::error::end_of_stream && ec != beast::error::timeout && ec != asio::error::eof &&
                 ec != asio::error::connection_reset && ec != asio::error::operation_aborted) {
        if (ec.category() == http::make_error_code(http::error::bad_method).category())  // malformed HTTP
          co_await reject_and_close(stream, http::status::bad_request, "malformed HTTP request", options.write_timeout_s);
      }
      break;
    }
    auto& msg = parser.get();
    if (const std::optional<beast_request::FramingRefusal> refusal = beast_request::framing_refusal(msg)) {
      co_await reject_and_close(stream, refusal->status, refusal->message, options.write_timeout_s);
      break;
    }
    const bool keep_alive = msg.keep_alive() && !draining.load();
    HttpRequest request = beast_request::to_http_request(msg);
    request.client = client;

    auto ex = std::make_shared<ExchangeImpl>(strand, std::move(request), options.max_unwritten_stream_bytes);
    std::list<std::weak_ptr<ExchangeImpl>>::iterator registered;
    {
      std::lock_guard lock(active_mutex);
      registered = active.insert(active.end(), ex);
    }
    ++num_active;
    receiving_body.release();
    const auto t0 = Clock::now();
    if (draining.load() && (!before_shutdown || past_deadline.load())) {
      ex->respond(shutting_down_response());
    } else if (is_cors_preflight(ex->request())) {  // answered here: no route, no API key (cors.h)
      ex->respond(cors_preflight_response(options.cors, ex->request()));
    } else {
      try {
        handler(ex);
      } catch (const std::exception& e) {
        spdlog::error("request handler failed: {}", e.what());
        ex->fail(e.what());
      }
    }
    const bool ok = co_await deliver(stream, ex, keep_alive, msg.version());
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    spdlog::info("{} {} {} {:.1f}ms{}{}{}", ex->request().method, ex->request().target, ex->status_, ms,
                 ex->log_note.empty() ? "" : " ", ex->log_note, ex->gone_ ? " (client gone)" : "");
    {
      std::lock_guard lock(active_mutex);
      active.erase(registered);
    }
    --num_active;
    if (!ok || !keep_alive || draining.load()) break;
  }
  boost::system::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream.close();
}

// Writes what the exchange produces until it ends. Returns false when the connection is unusable.
asio::awaitable<bool> HttpServer::Impl::deliver(beast::tcp_stream& stream, std::shared_ptr<ExchangeImpl> ex,
                                                bool keep_alive, unsigned http_version) {
  const bool head = ex->request().method == "HEAD";  // the response's header alone (its Content-Length as for GET)
  const bool unframed = http_version < 11;           // HTTP/1.0 knows no chunked encoding: a stream ends at the close
  // Watch for the client closing while we wait: a readable socket with nothing to read is EOF.
  stream.expires_never();
  auto watching = std::make_shared<bool>(true);
  // Readiness alone is not proof of EOF: the reactor may report a socket readable with nothing to read
  // (a readiness edge left over from the request just parsed). Peek: 0 bytes is EOF, EAGAIN is spurious
  // (wait again), data is a pipelined request (stop watching).
  auto watch = std::make_shared<std::function<void(boost::system::error_code)>>();
  *watch = [ex, watching, &stream, weak = std::weak_ptr(watch)](boost::system::error_code ec) {
    if (ec || !*watching) return;
    char byte = 0;
    const ssize_t n = ::recv(stream.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      ex->client_gone();
    } else if (n < 0) {
      if (auto again = weak.lock()) stream.socket().async_wait(tcp::socket::wait_read, *again);
    }
  };
  stream.socket().async_wait(tcp::socket::wait_read, *watch);
  ex->abort_io = [&stream] { stream.cancel(); };
  bool ok = true;
  bool done = false;
  while (!done) {
    if (ex->gone_) {
      ok = false;
      break;
    }
    if (ex->items_.empty()) {
      ex->wake_.expires_at(asio::steady_timer::time_point::max());
      co_await ex->wake_.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    ExchangeImpl::Item item = std::move(ex->items_.front());
    ex->items_.pop_front();
    stream.expires_after(std::chrono::seconds(options.write_timeout_s));
    boost::system::error_code ec;
    switch (item.kind) {
      case ExchangeImpl::Kind::kResponse: {
        http::response<http::string_body> res{static_cast<http::status>(item.response.status), 11};
        res.set(http::field::server, "pagoda");
        res.set(http::field::content_type, item.response.content_type);
        for (const auto& [k, v] : item.response.headers) res.set(k, v);
        for (const auto& [k, v] : cors_response_headers(options.cors, ex->request())) res.set(k, v);
        res.body() = std::move(item.response.body);
        res.keep_alive(keep_alive);
        res.prepare_payload();
        if (head) {
          http::response_serializer<http::string_body> sr{res};
          std::tie(ec, std::ignore) = co_await http::async_write_header(stream, sr, asio::as_tuple(asio::use_awaitable));
        } else {
          std::tie(ec, std::ignore) = co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
        }
        done = true;
        break;
      }
      case ExchangeImpl::Kind::kHead: {
        http::response<http::empty_body> res{static_cast<http::status>(item.response.status), 11};
        res.set(http::field::server, "pagoda");
        res.set(http::field::content_type, item.response.content_type);
        res.set(http::field::cache_control, "no-cache");
        for (const auto& [k, v] : cors_response_headers(options.cors, ex->request())) res.set(k, v);
        res.keep_alive(keep_alive && !unframed);
        res.chunked(!unframed);
        http::response_serializer<http::empty_body> sr{res};
        std::tie(ec, std::ignore) = co_await http::async_write_header(stream, sr, asio::as_tuple(asio::use_awaitable));
        break;
      }
      case ExchangeImpl::Kind::kChunk:
        if (unframed) {
          std::tie(ec, std::ignore) =
              co_await asio::async_write(stream, asio::buffer(item.data), asio::as_tuple(asio::use_awaitable));
        } else {
          std::tie(ec, std::ignore) = co_await asio::async_write(
              stream, http::make_chunk(asio::buffer(item.data)), asio::as_tuple(asio::use_awaitable));
        }
        if (!ec && options.on_stream_delivery && item.produced_at != Clock::time_point{})
          options.on_stream_delivery(std::chrono::duration<double>(Clock::now() - item.produced_at).count());
        break;
      case ExchangeImpl::Kind::kEnd:
        if (unframed) {
          ok = false;  // the end of an unframed stream is the connection's close
        } else {
          std::tie(ec, std::ignore) =
              co_await asio::async_write(stream, http::make_chunk_last(), asio::as_tuple(asio::use_awaitable));
        }
        done = true;
        break;
    }
    if (ec) {
      ex->client_gone();
      ok = false;
      break;
    }
  }
  *watching = false;
  watch.reset();
  ex->abort_io = nullptr;
  boost::system::error_code ignored;
  stream.socket().cancel(ignored);  // the watcher
  stream.expires_never();
  co_return ok && !ex->gone_;
}

}  // namespace pagoda::server
