// Owning handles for device memory (cudaMalloc) and pinned host memory (cudaMallocHost). Move-only;
// allocation failures throw pagoda::Error with the size asked for, so an out-of-memory at start-up is a
// clear message rather than a crash.
#pragma once

#include <cstddef>
#include <utility>

namespace pagoda::cuda {

// One allocation of `Space` memory: Space::allocate(bytes) (throws) and Space::release(pointer).
template <typename Space>
class Allocation {
 public:
  Allocation() = default;
  explicit Allocation(size_t bytes) : data_(bytes ? Space::allocate(bytes) : nullptr), bytes_(bytes) {}
  ~Allocation() {
    if (data_) Space::release(data_);
  }
  Allocation(Allocation&& o) noexcept : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  Allocation& operator=(Allocation&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }

  void* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

struct DeviceSpace {
  static void* allocate(size_t bytes);
  static void release(void* p);
};

struct PinnedHostSpace {
  static void* allocate(size_t bytes);
  static void release(void* p);
};

using DeviceBuffer = Allocation<DeviceSpace>;
using PinnedBuffer = Allocation<PinnedHostSpace>;

}  // namespace pagoda::cuda
