// ChunkShares (backend/cpu/chunk_shares.h): every chunk is taken exactly once, whatever the thread count, when the
// region has fewer threads than shares, when one thread is slow (the others take its share from the end), and when
// there are fewer chunks than threads; each thread starts on its own share in address order. The regions run on the
// kernels' ThreadPool, as CpuOps's do (and so under ThreadSanitizer: libgomp's barriers are not instrumented).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "pagoda/backend/cpu/chunk_shares.h"
#include "pagoda/backend/cpu/thread_pool.h"

namespace pagoda::cpu {
namespace {

// How many times each chunk was taken, and by which thread last.
struct Taken {
  explicit Taken(int64_t n) : count(static_cast<size_t>(n)), by(static_cast<size_t>(n)) {}
  std::vector<std::atomic<int>> count, by;
};

void run_region(const ChunkShares& shares, int threads, Taken& taken, int slow_thread = -1) {
  auto body = [&](int me) {
    shares.run(me, [&](int64_t c) {
      taken.count[static_cast<size_t>(c)].fetch_add(1);
      taken.by[static_cast<size_t>(c)].store(me);
      if (me == slow_thread) std::this_thread::sleep_for(std::chrono::microseconds(200));
    });
  };
  ThreadPool::instance().run(threads, [](void* context, int me, int) { (*static_cast<decltype(body)*>(context))(me); }, &body);
}

TEST(ChunkShares, EveryChunkOnceForAnyThreadCount) {
  for (const int64_t n : {0, 1, 3, 7, 64, 1000}) {
    for (const int shares : {1, 2, 3, 8}) {
      for (const int threads : {1, 2, shares}) {  // a region may get fewer threads than shares
        SCOPED_TRACE(::testing::Message() << n << " chunks, " << shares << " shares, " << threads << " threads");
        Taken taken(n);
        const ChunkShares s(n, shares);
        run_region(s, threads, taken);
        for (int64_t c = 0; c < n; ++c) ASSERT_EQ(taken.count[static_cast<size_t>(c)].load(), 1) << "chunk " << c;
      }
    }
  }
}

TEST(ChunkShares, OthersTakeTheEndOfASlowThreadsShare) {
  constexpr int64_t n = 64;
  Taken taken(n);
  const ChunkShares s(n, 2);
  run_region(s, 2, taken, /*slow_thread=*/1);
  for (int64_t c = 0; c < n; ++c) ASSERT_EQ(taken.count[static_cast<size_t>(c)].load(), 1);
  // Thread 0 took its own first chunk, and the last of thread 1's share from its end (thread 1 would have needed
  // 31 slow chunks, 6 ms, to get there first).
  EXPECT_EQ(taken.by[0].load(), 0);
  EXPECT_EQ(taken.by[n - 1].load(), 0);
}

TEST(ChunkShares, OneThreadTakesItsShareInOrder) {
  constexpr int64_t n = 10;
  const ChunkShares s(n, 1);
  std::vector<int64_t> order;
  s.run(0, [&](int64_t c) { order.push_back(c); });
  const std::vector<int64_t> want = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(order, want);
}

}  // namespace
}  // namespace pagoda::cpu
