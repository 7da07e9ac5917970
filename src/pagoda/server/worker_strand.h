// WorkerStrand: a serial executor over the WorkerPool. Functions posted to it run one at a time, in the order
// posted, each on one of the pool's threads; so a GenerationJob's work (detokenizing, logprob entries, JSON chunks)
// keeps its single-strand discipline without running on the HTTP I/O threads.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "pagoda/server/worker_pool.h"

namespace pagoda::server {

class WorkerStrand : public std::enable_shared_from_this<WorkerStrand> {
 public:
  // `client`: the pool's queue this strand's functions are taken from, in turn with other clients' (WorkerPool).
  // The pool must outlive the strand's last posted function.
  WorkerStrand(WorkerPool& pool, std::string client) : pool_(pool), client_(std::move(client)) {}
  WorkerStrand(const WorkerStrand&) = delete;
  WorkerStrand& operator=(const WorkerStrand&) = delete;

  // Thread-safe; never blocks on the functions. `fn` must not throw. Once the pool has stopped, what is posted
  // is dropped unrun (shutdown: nothing is left to deliver it to).
  void post(std::function<void()> fn);

 private:
  // On a pool thread: runs the oldest function, then gives the thread back to the pool, queueing itself again
  // behind the other clients' work if more is waiting (one function per turn, as every other pool task).
  void run_next();
  // Hands run_next() to the pool; false when the pool has stopped (the queue is then dropped).
  void schedule();

  WorkerPool& pool_;
  const std::string client_;
  std::mutex mutex_;
  std::deque<std::function<void()>> queue_;
  bool scheduled_ = false;  // a run_next() is queued or running: it alone takes from queue_, so order holds
};

}  // namespace pagoda::server
