// ThreadPool: workers spinning between regions, asleep after kSpinSeconds without one (thread_pool.h).
#include "pagoda/backend/cpu/thread_pool.h"

#include <immintrin.h>

#include <chrono>

namespace pagoda::cpu {
namespace {

// How long a worker spins for the next region before it sleeps: longer than the gaps between a step's regions and
// between the steps of a busy engine (tens to hundreds of microseconds), short enough that an idle server's workers
// give their cores back at once.
constexpr double kSpinSeconds = 1e-3;
// Spins (pause instructions, about 15 ns each) before a waiting thread also yields its core at each turn: a region
// ends within microseconds when its threads run, but when more threads want the cores than there are (two test
// processes on 2 vCPUs), a thread that only spins holds its core for a whole time slice while the thread it waits
// for cannot run (BatchInvariance ran 2.4-3.5x as long under `ctest -j2` before the waits yielded).
constexpr int kSpinsBeforeYield = 2000;

inline void pause_or_yield(int turn) {
  if (turn < kSpinsBeforeYield) _mm_pause();
  else std::this_thread::yield();
}

}  // namespace

ThreadPool& ThreadPool::instance() {
  static ThreadPool* pool = new ThreadPool;
  return *pool;
}

void ThreadPool::run(int threads, Job job, void* context) noexcept {
  bool idle = false;
  if (threads <= 1 || !busy_.compare_exchange_strong(idle, true, std::memory_order_acquire)) {
    job(context, 0, 1);
    return;
  }
  while (static_cast<int>(workers_.size()) < threads - 1) {
    const int me = static_cast<int>(workers_.size()) + 1;
    // From the count before this region's: a worker that starts after the region is published still runs it.
    workers_.emplace_back([this, me, seen = generation_.load()] { work(me, seen); });
  }
  job_ = job;
  context_ = context;
  count_ = threads;
  // Every worker answers every region (those past `threads` at once), so none still reads this region's fields
  // when the next one writes them.
  remaining_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1);  // seq_cst: a worker going to sleep either sees it or is counted in sleepers_
  if (sleepers_.load() > 0) generation_.notify_all();
  job(context, 0, threads);
  for (int turn = 0; remaining_.load(std::memory_order_acquire) > 0; ++turn) pause_or_yield(turn);
  busy_.store(false, std::memory_order_release);
}

uint64_t ThreadPool::wait_for_region(uint64_t seen) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kSpinSeconds));
  for (int i = 0;; ++i) {
    const uint64_t g = generation_.load(std::memory_order_acquire);
    if (g != seen) return g;
    pause_or_yield(i);
    if (i % 256 == 255 && Clock::now() >= until) break;
  }
  sleepers_.fetch_add(1);
  uint64_t g;
  while ((g = generation_.load()) == seen) generation_.wait(seen);
  sleepers_.fetch_sub(1);
  return g;
}

void ThreadPool::work(int me, uint64_t seen) {
  while (true) {
    seen = wait_for_region(seen);
    if (me < count_) job_(context_, me, count_);
    remaining_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace pagoda::cpu
