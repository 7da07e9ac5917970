// CUDA toolchain and launch path. Without a device the tests report SKIPPED, never passed.
#include <gtest/gtest.h>

#include "pagoda/backend/cuda/cuda_devices.h"

namespace pagoda {
namespace {

TEST(CudaDevices, SmokeKernelComputesOnEveryDevice) {
  const auto devices = cuda::list_devices();
  if (devices.empty()) GTEST_SKIP() << "no CUDA device";
  for (const auto& d : devices) {
    EXPECT_GT(d.total_memory, 0) << d.name;
    const std::vector<float> out = cuda::smoke_kernel(d.index, 1000, 0.5f);
    ASSERT_EQ(out.size(), 1000u);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(out[i], 0.5f * i) << d.name << " element " << i;
  }
}

}  // namespace
}  // namespace pagoda
