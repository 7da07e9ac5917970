// Helpers for GPU tests: skip (never pass) without a device; test data found from the environment when
// the tests run from a bundle on another machine (scripts/device/).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "pagoda/backend/cuda/cuda_devices.h"
#include "pagoda/core/dtype.h"
#include "pagoda/kernels/cuda_check.h"

namespace pagoda::test {

inline bool have_gpu() { return !cuda::list_devices().empty(); }

// PAGODA_TEST_DATA_DIR from the environment, else the source tree's tests/data.
inline std::string test_data_dir() {
  const char* env = std::getenv("PAGODA_TEST_DATA_DIR");
  return env && *env ? env : PAGODA_TEST_DATA_DIR;
}

// n elements of T on the device (at least one is allocated, so get() is never null), freed on scope exit.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) { PAGODA_CUDA_CHECK(cudaMalloc(&ptr_, std::max<size_t>(n, 1) * sizeof(T))); }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(ptr_); }

  T* get() const { return ptr_; }
  size_t size() const { return n_; }
  // Copies host (at most size() elements) to the start of the array.
  void upload(const std::vector<T>& host) {
    if (!host.empty())
      PAGODA_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), std::min(host.size(), n_) * sizeof(T), cudaMemcpyHostToDevice));
  }
  // The first `count` elements (all by default), after the device has finished its work.
  std::vector<T> download() const { return download(n_); }
  std::vector<T> download(size_t count) const {
    PAGODA_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> host(count);
    if (count) PAGODA_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, count * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* ptr_ = nullptr;
  size_t n_;
};

// Uniform bf16 in [-1, 1): a fast xorshift stream, enough for 16M-element operands.
inline std::vector<uint16_t> random_bf16(size_t n, uint64_t seed) {
  std::vector<uint16_t> v(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = f32_to_bf16(static_cast<float>(static_cast<int64_t>(s >> 40) - (int64_t{1} << 23)) * 0x1p-23f);
  }
  return v;
}

// Mean time of `iters` back-to-back calls after a warm-up, by CUDA events.
inline double time_ms(int iters, const std::function<void()>& call) {
  for (int i = 0; i < 3; ++i) call();
  cudaEvent_t start, stop;
  PAGODA_CUDA_CHECK(cudaEventCreate(&start));
  PAGODA_CUDA_CHECK(cudaEventCreate(&stop));
  PAGODA_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < iters; ++i) call();
  PAGODA_CUDA_CHECK(cudaEventRecord(stop));
  PAGODA_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  PAGODA_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / iters;
}

}  // namespace pagoda::test

// Measurements that print figures and check little (kernel profiles, bandwidth tables) run only when
// PAGODA_PROFILE=1 (scripts/device/run.sh sets it): as tests they would be checks that cannot fail.
#define PAGODA_SKIP_UNLESS_PROFILING()                                             \
  if (const char* profile = std::getenv("PAGODA_PROFILE"); !profile || *profile != '1') { \
    GTEST_SKIP() << "a measurement: set PAGODA_PROFILE=1 to run it";              \
  }

#define PAGODA_SKIP_WITHOUT_GPU()        \
  if (!::pagoda::test::have_gpu()) {     \
    GTEST_SKIP() << "no CUDA device";    \
  }
