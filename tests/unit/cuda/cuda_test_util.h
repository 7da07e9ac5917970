// Helpers for GPU tests: skip (never pass) without a device; test data found from the environment when
// the tests run from a bundle on another machine (scripts/device/).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "pagoda/backend/cuda/cuda_devices.h"

namespace pagoda::test {

inline bool have_gpu() { return !cuda::list_devices().empty(); }

// PAGODA_TEST_DATA_DIR from the environment, else the source tree's tests/data.
inline std::string test_data_dir() {
  const char* env = std::getenv("PAGODA_TEST_DATA_DIR");
  return env && *env ? env : PAGODA_TEST_DATA_DIR;
}

}  // namespace pagoda::test

#define PAGODA_SKIP_WITHOUT_GPU()        \
  if (!::pagoda::test::have_gpu()) {     \
    GTEST_SKIP() << "no CUDA device";    \
  }
