#include "pagoda/server/worker_strand.h"

#include <utility>

namespace pagoda::server {

void WorkerStrand::post(std::function<void()> fn) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(fn));
    if (scheduled_) return;
    scheduled_ = true;
  }
  schedule();
}

void WorkerStrand::run_next() {
  std::function<void()> fn;
  {
    std::lock_guard lock(mutex_);
    fn = std::move(queue_.front());
    queue_.pop_front();
  }
  fn();
  fn = nullptr;  // what it holds (a job, its exchange) goes before the next turn, on this thread
  {
    std::lock_guard lock(mutex_);
    if (queue_.empty()) {
      scheduled_ = false;
      return;
    }
  }
  schedule();
}

void WorkerStrand::schedule() {
  if (pool_.submit(client_, [self = shared_from_this()] { self->run_next(); })) return;
  // The pool has stopped. The queued functions hold jobs that hold this strand: dropping them ends that cycle.
  std::deque<std::function<void()>> dropped;
  std::lock_guard lock(mutex_);
  dropped.swap(queue_);
  scheduled_ = false;
  // (`dropped` is destroyed after the lock is released: its functions' owners may post here.)
}

}  // namespace pagoda::server
