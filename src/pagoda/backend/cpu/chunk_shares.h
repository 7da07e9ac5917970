// Chunks of work shared by the threads of an OpenMP region so that none waits long at its barrier: each thread
// streams its own contiguous share in address order (as schedule(static) would), then takes what is left of the
// others' from their ends. Decode on a 2-core Zen 5 spent 13.6% of its time in the barriers of static halves
// (docs/PERFORMANCE.md); dynamic scheduling was slower still (each thread's rows must stream in address order).
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include "pagoda/backend/cpu/parallel.h"

namespace pagoda::cpu {

// Chunks [0, n) shared by the threads of a parallel region: thread i streams the i-th contiguous share in address
// order, as schedule(static) would, claiming two chunks at a time; a thread done with its share then takes chunks one
// at a time from the ends of the others'. So a share that runs late (one core getting less of the memory bandwidth,
// a thread descheduled) no longer holds every thread at the region's barrier. Each row is still computed by one
// thread in one piece: results do not depend on who took it.
class ChunkShares {
 public:
  // The shares of `threads` threads (0 < threads), set before the region; a region with fewer threads is fine (the
  // shares nobody owns are taken from their ends).
  ChunkShares(int64_t num_chunks, int threads) : count_(threads) {
    thread_local std::unique_ptr<Share[]> storage;  // the calling thread's, reused call after call
    thread_local int capacity = 0;
    if (capacity < threads) {
      storage = std::make_unique<Share[]>(static_cast<size_t>(threads));
      capacity = threads;
    }
    shares_ = storage.get();
    for (int i = 0; i < threads; ++i)
      shares_[i].next_end.store(pack(num_chunks * i / threads, num_chunks * (i + 1) / threads), std::memory_order_relaxed);
  }

  // Calls take(chunk) for chunks until none is left; from inside the region, as thread `me`.
  template <class Take>
  void run(int me, const Take& take) const {
    if (me < count_) {
      Share& own = shares_[me];
      uint64_t v = own.next_end.load(std::memory_order_relaxed);
      while (next(v) < end(v)) {
        const int64_t first = next(v), last = std::min(first + 2, end(v));
        if (!own.next_end.compare_exchange_weak(v, pack(last, end(v)), std::memory_order_relaxed)) continue;
        for (int64_t c = first; c < last; ++c) take(c);
        v = own.next_end.load(std::memory_order_relaxed);
      }
    }
    for (int i = 1; i <= count_; ++i) {  // (all count_ shares when `me` owns none)
      Share& other = shares_[(me + i) % count_];
      uint64_t v = other.next_end.load(std::memory_order_relaxed);
      while (next(v) < end(v)) {
        if (!other.next_end.compare_exchange_weak(v, pack(next(v), end(v) - 1), std::memory_order_relaxed)) continue;
        take(end(v) - 1);
        v = other.next_end.load(std::memory_order_relaxed);
      }
    }
  }

 private:
  struct alignas(64) Share {
    std::atomic<uint64_t> next_end{0};  // the next chunk to take from the front, and the end, 32 bits each
  };
  static uint64_t pack(int64_t next, int64_t end) { return static_cast<uint64_t>(next) << 32 | static_cast<uint64_t>(end); }
  static int64_t next(uint64_t v) { return static_cast<int64_t>(v >> 32); }
  static int64_t end(uint64_t v) { return static_cast<int64_t>(v & 0xffffffffu); }

  Share* shares_;
  int count_;
};

// take(chunk) for every chunk of [0, num_chunks): over the threads of a region (parallel.h) in shares when `parallel`,
// else on the calling thread. Per-thread scratch belongs in a thread_local inside take.
template <class Take>
void for_each_chunk(int64_t num_chunks, bool parallel, const Take& take) {
  const bool threads = use_threads(parallel);
  const ChunkShares shares(num_chunks, threads ? region_threads() : 1);
  parallel_region(threads, [&](int me) { shares.run(me, take); });
}

}  // namespace pagoda::cpu
