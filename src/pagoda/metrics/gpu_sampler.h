// GpuSampler: GPU utilisation read from NVML by a thread every few tens of milliseconds (SM activity,
// memory-bandwidth activity, memory used, power, SM clock), kept as gauges and as a bounded history for
// timelines. NVML is loaded at run time with dlopen("libnvidia-ml.so.1"), so every build (CPU presets
// included) has the sampler and none needs NVML's headers or links it. Without the library or a GPU
// the sampler is off, says why, and its gauge pagoda:gpu_sampler_enabled reads 0.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pagoda/metrics/metrics.h"

namespace pagoda::metrics {

struct GpuSample {
  std::chrono::steady_clock::time_point time;
  int device = 0;             // NVML device index
  double sm_util = 0;         // 0-1: share of NVML's last sample period in which a kernel ran
  double mem_bw_util = 0;     // 0-1: share of it in which device memory was read or written
  double memory_used_bytes = 0;
  double memory_total_bytes = 0;
  double power_watts = 0;
  double power_limit_watts = 0;  // enforced limit; 0 when NVML does not say
  double sm_clock_mhz = 0;
  double sm_clock_max_mhz = 0;   // 0 when NVML does not say
};

struct GpuSamplerOptions {
  std::string library = "libnvidia-ml.so.1";  // tests point this at a stand-in
  std::vector<int> devices;                    // NVML indices; empty: device 0
  int interval_ms = 50;
  size_t max_history = 200000;                 // samples kept (per device, oldest dropped): ~2.8 h at 50 ms
};

class GpuSampler {
 public:
  using Clock = std::chrono::steady_clock;

  // Registers its gauges in `registry` (with `labels`, plus gpu="N" per device), loads NVML and starts
  // sampling when it can. Never throws for a missing library or GPU: the sampler is then off.
  GpuSampler(GpuSamplerOptions options, Registry& registry, const Labels& labels = {});
  ~GpuSampler();  // stops the thread, shuts NVML down
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  bool enabled() const { return enabled_; }
  // One line for the log: "on: NVIDIA H200 (device 0), every 50 ms" or "off: <why>".
  const std::string& status() const { return status_; }
  const std::vector<int>& devices() const { return devices_; }
  std::vector<std::string> device_names() const { return names_; }

  // Thread-safe: the kept samples taken at or after `since`, oldest first.
  std::vector<GpuSample> samples_since(Clock::time_point since) const;
  // Takes one sample of every device now (the thread calls this; tests may too). False when off.
  bool sample_once();

 private:
  struct Nvml;
  struct DeviceGauges {
    Gauge *sm_util, *mem_bw_util, *memory_used, *memory_total, *power, *sm_clock;
  };

  bool start(const Labels& labels, Registry& registry);
  void run();

  GpuSamplerOptions options_;
  std::unique_ptr<Nvml> nvml_;
  std::vector<int> devices_;
  std::vector<void*> handles_;  // nvmlDevice_t per device
  std::vector<std::string> names_;
  std::vector<DeviceGauges> gauges_;
  bool enabled_ = false;
  std::string status_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::deque<GpuSample> history_;
  std::thread thread_;
};

}  // namespace pagoda::metrics
