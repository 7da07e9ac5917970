// A stand-in for libnvidia-ml.so.1 with two fixed GPUs, built as a shared library so that the GPU
// sampler's dlopen path runs on machines without a driver. Values follow NVML's units (percent, bytes,
// milliwatts, MHz). Signatures follow NVML's C API.
#include <cstring>

extern "C" {

struct FakeUtilization {
  unsigned int gpu, memory;
};
struct FakeMemory {
  unsigned long long total, free, used;
};

static int g_initialized = 0;

int nvmlInit_v2() {
  g_initialized = 1;
  return 0;
}
int nvmlShutdown() {
  g_initialized = 0;
  return 0;
}
const char* nvmlErrorString(int) { return "fake error"; }
int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index >= 2) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = reinterpret_cast<void*>(static_cast<unsigned long>(index + 1));
  return 0;
}
int nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  std::strncpy(name, reinterpret_cast<unsigned long>(device) == 1 ? "Fake GPU A" : "Fake GPU B", length);
  return 0;
}
int nvmlDeviceGetUtilizationRates(void* device, FakeUtilization* u) {
  if (!g_initialized) return 1;  // NVML_ERROR_UNINITIALIZED
  u->gpu = reinterpret_cast<unsigned long>(device) == 1 ? 75 : 10;
  u->memory = 40;
  return 0;
}
int nvmlDeviceGetMemoryInfo(void*, FakeMemory* m) {
  m->total = 80ull << 30;
  m->used = 20ull << 30;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetPowerUsage(void*, unsigned int* mw) {
  *mw = 350500;
  return 0;
}
int nvmlDeviceGetEnforcedPowerLimit(void*, unsigned int* mw) {
  *mw = 700000;
  return 0;
}
int nvmlDeviceGetClockInfo(void*, int type, unsigned int* mhz) {
  *mhz = type == 1 ? 1980 : 0;
  return 0;
}
int nvmlDeviceGetMaxClockInfo(void*, int, unsigned int* mhz) {
  *mhz = 1980;
  return 0;
}

}  // extern "C"
