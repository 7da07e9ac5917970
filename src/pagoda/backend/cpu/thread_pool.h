// The threads the CPU kernels' regions run on (parallel.h): one pool a process. A region runs the same job on the
// calling thread (index 0) and on workers 1..count-1, and returns once every one has returned. Between regions the
// workers spin on the region counter, and sleep only after about a millisecond without work, so a region makes no
// syscall while they spin: a decode step of TinyLlama opens about 150 regions microseconds apart, and libgomp made
// two futex syscalls for each (its barriers wake sleepers unconditionally; strace counted 330 a token, 2026-12-07).
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace pagoda::cpu {

class ThreadPool {
 public:
  // job(context, me, count): the part of thread `me` of `count`.
  using Job = void (*)(void* context, int me, int count);

  // The process's pool, never destroyed: its workers end with the process (a pool joined at exit would hang a
  // region still opened by another thread then).
  static ThreadPool& instance();

  // Runs job on `threads` threads (the caller among them) and returns when all are done. A region opened while the
  // pool runs another (a nested region, or a second caller) runs on the caller alone: job(context, 0, 1).
  void run(int threads, Job job, void* context) noexcept;  // a job that throws ends the process, as in an OpenMP region

 private:
  ThreadPool() = default;
  void work(int me, uint64_t seen);
  uint64_t wait_for_region(uint64_t seen);

  std::atomic<bool> busy_{false};    // set by the caller of a region (a flag, not a mutex: a nested region tests it
                                     // from the thread that set it)
  std::vector<std::thread> workers_;  // worker i has index i + 1; grown while busy_
  // The region: written by its caller before generation_ moves, read by every worker after.
  Job job_ = nullptr;
  void* context_ = nullptr;
  int count_ = 1;
  alignas(64) std::atomic<uint64_t> generation_{0};  // one more for each region
  alignas(64) std::atomic<int> remaining_{0};        // workers that have not finished the region
  alignas(64) std::atomic<int> sleepers_{0};          // workers asleep on generation_
};

}  // namespace pagoda::cpu
