#include "pagoda/server/worker_exchange.h"

#include <exception>
#include <utility>

namespace pagoda::server {

WorkerExchange::WorkerExchange(std::shared_ptr<Exchange> io, std::shared_ptr<WorkerStrand> strand)
    : io_(std::move(io)), strand_(std::move(strand)) {
  // Registered now, not when the handler asks on the worker strand: a cancellation in between is not lost, and
  // the HTTP layer sees an exchange that will answer (at the shutdown deadline it is cancelled, not given a 503).
  io_->on_cancel([strand = strand_, cancel = cancel_] {
    strand->post([cancel] {
      if (*cancel) {
        auto fn = std::move(*cancel);
        *cancel = nullptr;
        fn();
      }
    });
  });
}

void WorkerExchange::respond(HttpResponse response) {
  io_->post([io = io_, note = log_note, response = std::move(response)]() mutable {
    if (!note.empty()) io->log_note = std::move(note);
    io->respond(std::move(response));
  });
}

void WorkerExchange::begin_stream(int status, const std::string& content_type) {
  io_->post([io = io_, status, content_type] { io->begin_stream(status, content_type); });
}

void WorkerExchange::write(std::string data, std::chrono::steady_clock::time_point produced_at) {
  io_->post([io = io_, data = std::move(data), produced_at]() mutable { io->write(std::move(data), produced_at); });
}

void WorkerExchange::end_stream() {
  io_->post([io = io_, note = log_note]() mutable {
    if (!note.empty()) io->log_note = std::move(note);
    io->end_stream();
  });
}

void WorkerExchange::post(std::function<void()> fn) {
  strand_->post([io = io_, fn = std::move(fn)] {
    try {
      fn();
    } catch (const std::exception&) {  // thrown again on the HTTP exchange's strand, whose post() logs it and answers
      io->post([error = std::current_exception()] { std::rethrow_exception(error); });
    }
  });
}

}  // namespace pagoda::server
