// WorkerExchange: an Exchange whose strand is a WorkerStrand on a WorkerPool, in front of the HTTP
// layer's exchange. A handler given it (a GenerationJob) does all its work on the worker strand; what it answers
// (the response, the stream's header, writes, the end) is handed to the HTTP exchange's strand, in order, so that
// the I/O threads only move bytes.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "pagoda/server/exchange.h"
#include "pagoda/server/worker_strand.h"

namespace pagoda::server {

class WorkerExchange : public Exchange {
 public:
  // On `io`'s strand (it registers the cancel hook there at once, as a handler that answers later does).
  WorkerExchange(std::shared_ptr<Exchange> io, std::shared_ptr<WorkerStrand> strand);

  // Thread-safe, as the HTTP exchange's: the request does not change once handled.
  const HttpRequest& request() const override { return io_->request(); }
  // These four, on the worker strand: each is posted to the HTTP exchange's strand. The one that ends the exchange
  // takes log_note along (the HTTP layer reads its own exchange's note once the exchange has ended).
  void respond(HttpResponse response) override;
  void begin_stream(int status, const std::string& content_type) override;
  void write(std::string data, std::chrono::steady_clock::time_point produced_at = {}) override;
  void end_stream() override;
  // `fn` runs on the worker strand when the HTTP exchange is cancelled (see Exchange::on_cancel).
  void on_cancel(std::function<void()> fn) override { *cancel_ = std::move(fn); }
  bool cancelled() const override { return io_->cancelled(); }
  // Runs `fn` on the worker strand; an exception is thrown again in the HTTP exchange's post(), which ends the
  // exchange with a 500.
  void post(std::function<void()> fn) override;

 private:
  std::shared_ptr<Exchange> io_;
  std::shared_ptr<WorkerStrand> strand_;
  // The handler's cancel hook; touched on the worker strand only. Shared with the hook registered on io_ (which
  // must not hold this exchange: the handler holds it, and io_ holds its hook until it ends).
  std::shared_ptr<std::function<void()>> cancel_ = std::make_shared<std::function<void()>>();
};

}  // namespace pagoda::server
