// The CUDA devices this process can see. The first piece of the CUDA backend: compiled only by the
// `cuda` preset (PAGODA_CUDA=ON); nothing outside backend/cuda and kernels/ includes a CUDA header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pagoda::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  int64_t total_memory = 0;  // bytes
  int num_sms = 0;
};

// Empty when there is no driver or no device (never throws for that).
std::vector<DeviceInfo> list_devices();

// Runs a tiny kernel on `device` (fills n floats with i * scale) and returns the values: proves that the
// toolchain, the driver and the launch path work. Throws pagoda::Error on any CUDA error.
std::vector<float> smoke_kernel(int device, int n, float scale);

}  // namespace pagoda::cuda
