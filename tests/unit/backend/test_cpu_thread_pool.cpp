// The CPU kernels' regions (backend/cpu/parallel.h on backend/cpu/thread_pool.h): every index once, serial work on
// the caller, a nested region or a second caller's region on that caller; and the kernels that open regions give the
// same bits for any thread count, more threads than cores included (the pool's workers, ChunkShares' shares, each
// thread's scratch).
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "pagoda/backend/cpu/cpu_kernels.h"
#include "pagoda/backend/cpu/linear_quant.h"
#include "pagoda/backend/cpu/linear_w4_int8.h"
#include "pagoda/backend/cpu/parallel.h"
#include "pagoda/core/dtype.h"
#include "random_quant_weight.h"
#include "random_values.h"

namespace pagoda::cpu {
namespace {

// Sets OpenMP's thread count (which the regions read) for a scope.
class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ThreadCount() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

TEST(ParallelFor, EveryIndexOnceAndSerialWorkOnTheCaller) {
  for (const int threads : {1, 2, 3, 2}) {
    const ThreadCount count(threads);
    for (const bool parallel : {false, true}) {
      SCOPED_TRACE(testing::Message() << threads << " threads, parallel " << parallel);
      constexpr int64_t n = 37;
      std::vector<std::atomic<int>> seen(n);
      std::vector<std::thread::id> by(n);
      const auto visit = [&](int64_t i) {
        seen[static_cast<size_t>(i)].fetch_add(1);
        by[static_cast<size_t>(i)] = std::this_thread::get_id();
      };
      parallel_for(n, parallel, visit);
      parallel_for_dynamic(n, parallel, visit);
      std::vector<std::atomic<int>> bodies(static_cast<size_t>(threads));
      parallel_region(parallel, [&](int me) { bodies[static_cast<size_t>(me)].fetch_add(1); });
      const bool region = parallel && threads > 1;
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(seen[static_cast<size_t>(i)].load(), 2) << i;
        if (!region) {
          EXPECT_EQ(by[static_cast<size_t>(i)], std::this_thread::get_id()) << i;
        }
      }
      for (int me = 0; me < threads; ++me) EXPECT_EQ(bodies[static_cast<size_t>(me)].load(), me == 0 || region ? 1 : 0);
    }
  }
}

// A region opened inside another runs on its caller; one opened from a second thread while the pool is busy too.
TEST(ParallelFor, NestedRegionsAndASecondCallerRunOnTheirCaller) {
  const ThreadCount count(2);
  constexpr int64_t n = 64;
  std::vector<std::atomic<int>> seen(static_cast<size_t>(n * n));
  parallel_for(n, true, [&](int64_t i) {
    parallel_for(n, true, [&](int64_t j) { seen[static_cast<size_t>(i * n + j)].fetch_add(1); });
  });
  std::thread other([&] {
    omp_set_num_threads(2);
    for (int r = 0; r < 200; ++r) parallel_for(n, true, [&](int64_t j) { seen[static_cast<size_t>(j)].fetch_add(1); });
  });
  for (int r = 0; r < 200; ++r) parallel_for(n, true, [&](int64_t j) { seen[static_cast<size_t>(n + j)].fetch_add(1); });
  other.join();
  for (int64_t k = 0; k < n * n; ++k) EXPECT_EQ(seen[static_cast<size_t>(k)].load(), k < 2 * n ? 201 : 1) << k;
}


// Each kernel that opens a region, on shapes past its threshold (n x k x tokens >= 2^16 for the products,
// rows x dim >= 2^15 for the norm and RoPE) with row counts that leave partial chunks, run with 1 thread and then 2, 3
// and 5: every output the same bits.
TEST(CpuKernelsOnThePool, ResultsDoNotDependOnTheThreadCount) {
  constexpr int64_t n = 200, k = 256;
  const std::vector<float> w32 = test::random_values(n * k, 1);
  std::vector<uint16_t> w16(w32.size());
  for (size_t i = 0; i < w32.size(); ++i) w16[i] = f32_to_f16(w32[i]);
  test::RandomQuantWeight rw(test::QuantForm::kInt4Zeros, n, k, 32, 5);
  Weight w4 = rw.weight;
  w4.activations = ActivationQuant::kInt8Block;
  ASSERT_TRUE(linear_w4_int8_supported(w4));
  constexpr int64_t rows = 64, heads = 8, head_dim = 64;
  const std::vector<float> norm_weight = test::random_values(heads * head_dim, 6);
  std::vector<float> inv_freq(head_dim / 2);
  for (int64_t i = 0; i < head_dim / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / head_dim);
  std::vector<int32_t> positions(rows);
  for (int64_t t = 0; t < rows; ++t) positions[t] = static_cast<int32_t>(3 * t + 1);

  // Every kernel's outputs, one after the other.
  const auto outputs = [&] {
    std::vector<float> all;
    for (const int64_t tokens : {1, 7, 40}) {  // decode rows streamed; prompts' rows prepared (40: two token blocks)
      const std::vector<float> x = test::random_values(tokens * k, 2 + static_cast<uint32_t>(tokens));
      std::vector<float> out(tokens * n);
      linear_f32(out.data(), x.data(), tokens, w32.data(), DType::kF32, n, k);
      all.insert(all.end(), out.begin(), out.end());
      linear_f32(out.data(), x.data(), tokens, w16.data(), DType::kF16, n, k);
      all.insert(all.end(), out.begin(), out.end());
      linear_quant_f32(out.data(), x.data(), tokens, w4);
      all.insert(all.end(), out.begin(), out.end());
    }
    const std::vector<float> x = test::random_values(rows * heads * head_dim, 7);
    std::vector<float> out(x.size());
    rms_norm_f32(out.data(), x.data(), norm_weight.data(), rows, heads * head_dim, 1e-5f);
    all.insert(all.end(), out.begin(), out.end());
    std::vector<float> rotated = x;
    rope_f32(rotated.data(), positions.data(), rows, heads, head_dim, inv_freq.data());
    all.insert(all.end(), rotated.begin(), rotated.end());
    return all;
  };
  std::vector<float> one_thread;
  {
    const ThreadCount count(1);
    one_thread = outputs();
  }
  for (const int threads : {2, 3, 5}) {
    const ThreadCount count(threads);
    const std::vector<float> got = outputs();
    ASSERT_EQ(got.size(), one_thread.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(std::memcmp(&got[i], &one_thread[i], sizeof(float)), 0) << threads << " threads, output " << i;
  }
}

}  // namespace
}  // namespace pagoda::cpu
