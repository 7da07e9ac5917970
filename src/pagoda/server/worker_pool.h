// WorkerPool: a few threads for a request's CPU work (parsing large bodies, chat templates, tokenizing and
// detokenizing), so that the HTTP I/O threads only move bytes and no request holds up other clients.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pagoda::server {

class WorkerPool {
 public:
  explicit WorkerPool(int num_threads);
  ~WorkerPool();  // runs what is queued, then joins
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Thread-safe. `task` must not throw.
  void submit(std::function<void()> task);

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace pagoda::server
