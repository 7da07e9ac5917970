#include "pagoda/server/worker_pool.h"

#include <algorithm>

namespace pagoda::server {

WorkerPool::WorkerPool(int num_threads) {
  // A thread that cannot be created (the system's limit) is an error for the caller, after the others are joined
  // (a joinable std::thread destroyed while the exception unwinds would terminate the process).
  try {
    start(std::max(1, num_threads));
  } catch (...) {
    stop();
    throw;
  }
}

void WorkerPool::start(int num_threads) {
  for (int i = 0; i < num_threads; ++i)
    threads_.emplace_back([this] {
      for (;;) {
        std::function<void()> task;
        {
          std::unique_lock lock(mutex_);
          wake_.wait(lock, [this] { return stopping_ || !turns_.empty(); });
          if (turns_.empty()) return;  // stopping, nothing left
          // The client whose turn it is gives one task, then goes to the back of the turns if it has more.
          std::string client = std::move(turns_.front());
          turns_.pop_front();
          auto queue = queues_.find(client);
          task = std::move(queue->second.front());
          queue->second.pop_front();
          if (queue->second.empty())
            queues_.erase(queue);
          else
            turns_.push_back(std::move(client));
        }
        task();
      }
    });
}

WorkerPool::~WorkerPool() { stop(); }

void WorkerPool::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
}

bool WorkerPool::submit(const std::string& client, std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;  // (`task` is destroyed by the caller, after the lock is released)
    auto& queue = queues_[client];
    if (queue.empty()) turns_.push_back(client);
    queue.push_back(std::move(task));
  }
  wake_.notify_one();
  return true;
}

}  // namespace pagoda::server
