// WorkerPool: a few threads for a request's CPU work (parsing large bodies, chat templates, tokenizing; in a pool
// of its own, each generation's per-token work through its WorkerStrand), so that the HTTP I/O threads only move
// bytes and no request holds up other clients. Work is queued per client (a tenant, or an address) and taken from the clients in turn, so
// one client's backlog delays another's work by at most one task per busy client, never by the whole backlog.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace pagoda::server {

class WorkerPool {
 public:
  explicit WorkerPool(int num_threads);
  ~WorkerPool();  // stop()
  // Runs what is queued, then joins the threads; from its start on, submit() queues nothing. Idempotent.
  void stop();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Thread-safe. Queues `task` (which must not throw) behind `client`'s earlier tasks and returns true; once stop()
  // has begun, returns false and destroys `task` unrun (the engine may still post a generation's last events while
  // the server shuts down).
  bool submit(const std::string& client, std::function<void()> task);

 private:
  void start(int num_threads);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::unordered_map<std::string, std::deque<std::function<void()>>> queues_;  // non-empty queues only
  std::deque<std::string> turns_;  // clients with queued tasks, the next to be served first
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace pagoda::server
