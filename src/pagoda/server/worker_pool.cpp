#include "pagoda/server/worker_pool.h"

#include <algorithm>

namespace pagoda::server {

WorkerPool::WorkerPool(int num_threads) {
  for (int i = 0; i < std::max(1, num_threads); ++i)
    threads_.emplace_back([this] {
      for (;;) {
        std::function<void()> task;
        {
          std::unique_lock lock(mutex_);
          wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
          if (queue_.empty()) return;  // stopping, nothing left
          task = std::move(queue_.front());
          queue_.pop_front();
        }
        task();
      }
    });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::submit(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(task));
  }
  wake_.notify_one();
}

}  // namespace pagoda::server
