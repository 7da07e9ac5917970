// Device enumeration and a launch smoke test, every CUDA call checked.
#include <cuda_runtime.h>

#include <string>

#include "pagoda/backend/cuda/cuda_devices.h"
#include "pagoda/core/error.h"

namespace pagoda::cuda {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw Error(std::string(what) + ": " + cudaGetErrorString(status));
}

__global__ void fill_scaled(float* out, int n, float scale) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<float>(i) * scale;
}

}  // namespace

std::vector<DeviceInfo> list_devices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver / no device" error
    return {};
  }
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    devices.push_back(DeviceInfo{i, prop.name, prop.major, prop.minor, static_cast<int64_t>(prop.totalGlobalMem),
                                 prop.multiProcessorCount});
  }
  return devices;
}

std::vector<float> smoke_kernel(int device, int n, float scale) {
  check(cudaSetDevice(device), "cudaSetDevice");
  float* d_out = nullptr;
  check(cudaMalloc(&d_out, sizeof(float) * n), "cudaMalloc");
  fill_scaled<<<(n + 255) / 256, 256>>>(d_out, n, scale);
  check(cudaGetLastError(), "fill_scaled launch");
  std::vector<float> out(static_cast<size_t>(n));
  const cudaError_t copied = cudaMemcpy(out.data(), d_out, sizeof(float) * n, cudaMemcpyDeviceToHost);
  cudaFree(d_out);
  check(copied, "cudaMemcpy");
  return out;
}

}  // namespace pagoda::cuda
