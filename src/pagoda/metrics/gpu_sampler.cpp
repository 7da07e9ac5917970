// NVML through dlopen: the handful of entry points the sampler calls, declared here with NVML's C ABI
// (documented in NVIDIA's nvml.h), a sampling thread, gauges and a bounded history.
#include "pagoda/metrics/gpu_sampler.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <type_traits>

namespace pagoda::metrics {
namespace {

// NVML's types, as its C API defines them.
using nvmlReturn_t = int;  // NVML_SUCCESS = 0
using nvmlDevice_t = void*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;  // nvmlClockType_t NVML_CLOCK_SM
struct nvmlUtilization_t {
  unsigned int gpu;     // percent of the sample period in which one or more kernels ran
  unsigned int memory;  // percent of it in which device memory was read or written
};
struct nvmlMemory_t {
  unsigned long long total, free, used;  // bytes
};

}  // namespace

struct GpuSampler::Nvml {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*device_count)(unsigned int*) = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned int*) = nullptr;        // milliwatts
  nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned int*) = nullptr;  // milliwatts
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int*) = nullptr;      // MHz
  nvmlReturn_t (*max_clock)(nvmlDevice_t, int, unsigned int*) = nullptr;  // MHz
  bool initialized = false;

  ~Nvml() {
    if (initialized && shutdown) shutdown();
    if (lib) dlclose(lib);
  }
  std::string error(nvmlReturn_t r) const {
    return error_string ? fmt::format("{} ({})", error_string(r), r) : fmt::format("NVML error {}", r);
  }
  // Loads the library and its symbols; "" on success, else why not.
  std::string load(const std::string& path) {
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      return fmt::format("cannot load {} ({}): no NVIDIA driver on this machine?", path, e ? e : "unknown error");
    }
    const auto find = [&](auto& fn, const char* name, const char* fallback = nullptr) {
      void* sym = dlsym(lib, name);
      if (!sym && fallback) sym = dlsym(lib, fallback);
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(sym);
      return sym != nullptr;
    };
    find(error_string, "nvmlErrorString");
    find(power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    find(max_clock, "nvmlDeviceGetMaxClockInfo");
    find(name, "nvmlDeviceGetName");
    const bool ok = find(init, "nvmlInit_v2", "nvmlInit") && find(shutdown, "nvmlShutdown") &&
                    find(device_count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount") &&
                    find(handle_by_index, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex") &&
                    find(utilization, "nvmlDeviceGetUtilizationRates") && find(memory, "nvmlDeviceGetMemoryInfo") &&
                    find(power, "nvmlDeviceGetPowerUsage") && find(clock, "nvmlDeviceGetClockInfo");
    if (!ok) return path + " lacks an NVML function the sampler needs";
    const nvmlReturn_t r = init();
    if (r != kNvmlSuccess) return "nvmlInit failed: " + error(r);
    initialized = true;
    return "";
  }
};

GpuSampler::GpuSampler(GpuSamplerOptions options, Registry& registry, const Labels& labels)
    : options_(std::move(options)) {
  Gauge& enabled = registry.gauge("pagoda:gpu_sampler_enabled",
                                  "1 when the NVML GPU sampler runs, 0 when it is off (no NVML library or GPU).", labels);
  enabled_ = start(labels, registry);
  enabled.set(enabled_ ? 1 : 0);
  if (enabled_) thread_ = std::thread([this] { run(); });
}

GpuSampler::~GpuSampler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool GpuSampler::start(const Labels& labels, Registry& registry) {
  if (options_.interval_ms <= 0) {
    status_ = "off: disabled (interval 0)";
    return false;
  }
  nvml_ = std::make_unique<Nvml>();
  if (std::string why = nvml_->load(options_.library); !why.empty()) {
    status_ = "off: " + why;
    nvml_.reset();
    return false;
  }
  unsigned int count = 0;
  if (nvmlReturn_t r = nvml_->device_count(&count); r != kNvmlSuccess) {
    status_ = "off: nvmlDeviceGetCount failed: " + nvml_->error(r);
    nvml_.reset();
    return false;
  }
  devices_ = options_.devices.empty() ? std::vector<int>{0} : options_.devices;
  for (int d : devices_) {
    nvmlDevice_t handle = nullptr;
    if (d < 0 || static_cast<unsigned>(d) >= count) {
      status_ = fmt::format("off: NVML sees {} GPU(s), no device {}", count, d);
      nvml_.reset();
      return false;
    }
    if (nvmlReturn_t r = nvml_->handle_by_index(static_cast<unsigned>(d), &handle); r != kNvmlSuccess) {
      status_ = fmt::format("off: no handle for GPU {}: {}", d, nvml_->error(r));
      nvml_.reset();
      return false;
    }
    handles_.push_back(handle);
    char name[96] = "GPU";
    if (nvml_->name && nvml_->name(handle, name, sizeof name) != kNvmlSuccess) std::snprintf(name, sizeof name, "GPU");
    names_.emplace_back(name);
  }
  for (int d : devices_) {
    Labels l = labels;
    l.emplace_back("gpu", std::to_string(d));
    gauges_.push_back(DeviceGauges{
        &registry.gauge("pagoda:gpu_utilization_perc",
                        "Share of NVML's sample period in which a kernel ran on the GPU (0-1).", l),
        &registry.gauge("pagoda:gpu_memory_bandwidth_utilization_perc",
                        "Share of NVML's sample period in which GPU memory was read or written (0-1).", l),
        &registry.gauge("pagoda:gpu_memory_used_bytes", "GPU memory in use, all processes.", l),
        &registry.gauge("pagoda:gpu_memory_total_bytes", "GPU memory in total.", l),
        &registry.gauge("pagoda:gpu_power_watts", "GPU power draw in watts.", l),
        &registry.gauge("pagoda:gpu_sm_clock_mhz", "GPU SM clock in MHz.", l),
    });
  }
  std::string list;
  for (size_t i = 0; i < devices_.size(); ++i)
    list += fmt::format("{}{} (device {})", i ? ", " : "", names_[i], devices_[i]);
  status_ = fmt::format("on: {}, every {} ms", list, options_.interval_ms);
  return true;
}

bool GpuSampler::sample_once() {
  if (!enabled_) return false;
  const Clock::time_point now = Clock::now();
  std::vector<GpuSample> taken;
  for (size_t i = 0; i < handles_.size(); ++i) {
    nvmlDevice_t h = handles_[i];
    GpuSample s;
    s.time = now;
    s.device = devices_[i];
    nvmlUtilization_t u{};
    if (nvml_->utilization(h, &u) == kNvmlSuccess) {
      s.sm_util = u.gpu / 100.0;
      s.mem_bw_util = u.memory / 100.0;
    }
    nvmlMemory_t m{};
    if (nvml_->memory(h, &m) == kNvmlSuccess) {
      s.memory_used_bytes = static_cast<double>(m.used);
      s.memory_total_bytes = static_cast<double>(m.total);
    }
    unsigned int v = 0;
    if (nvml_->power(h, &v) == kNvmlSuccess) s.power_watts = v / 1000.0;
    if (nvml_->power_limit && nvml_->power_limit(h, &v) == kNvmlSuccess) s.power_limit_watts = v / 1000.0;
    if (nvml_->clock(h, kNvmlClockSm, &v) == kNvmlSuccess) s.sm_clock_mhz = v;
    if (nvml_->max_clock && nvml_->max_clock(h, kNvmlClockSm, &v) == kNvmlSuccess) s.sm_clock_max_mhz = v;
    const DeviceGauges& g = gauges_[i];
    g.sm_util->set(s.sm_util);
    g.mem_bw_util->set(s.mem_bw_util);
    g.memory_used->set(s.memory_used_bytes);
    g.memory_total->set(s.memory_total_bytes);
    g.power->set(s.power_watts);
    g.sm_clock->set(s.sm_clock_mhz);
    taken.push_back(s);
  }
  std::lock_guard lock(mutex_);
  for (const GpuSample& s : taken) history_.push_back(s);
  const size_t limit = options_.max_history * std::max<size_t>(1, handles_.size());
  while (history_.size() > limit) history_.pop_front();
  return true;
}

std::vector<GpuSample> GpuSampler::samples_since(Clock::time_point since) const {
  std::lock_guard lock(mutex_);
  auto first = std::lower_bound(history_.begin(), history_.end(), since,
                                [](const GpuSample& s, Clock::time_point t) { return s.time < t; });
  return std::vector<GpuSample>(first, history_.end());
}

void GpuSampler::run() {
  const auto interval = std::chrono::milliseconds(options_.interval_ms);
  auto next = Clock::now();
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    sample_once();
    lock.lock();
    next += interval;
    const auto now = Clock::now();
    if (next < now) next = now;  // fell behind (a slow NVML call): no burst of catch-up samples
    wake_.wait_until(lock, next, [this] { return stopping_; });
  }
}

}  // namespace pagoda::metrics
