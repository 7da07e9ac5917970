// Tensor: a non-owning, contiguous, row-major view (data pointer, dtype, device, shape). Storage is
// owned elsewhere: a Buffer, an mmap'd checkpoint, or a device allocation.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "pagoda/core/check.h"
#include "pagoda/core/dtype.h"

namespace pagoda {

enum class Device : uint8_t { kCpu, kCuda };

struct Tensor {
  static constexpr int kMaxDims = 4;

  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kCpu;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};

  Tensor() = default;
  Tensor(void* data, DType dtype, std::initializer_list<int64_t> dims, Device device = Device::kCpu);
  static Tensor from_span(void* data, DType dtype, std::span<const int64_t> dims, Device device = Device::kCpu);

  int64_t dim(int i) const {
    PAGODA_CHECK(i >= 0 && i < ndim, "dim {} of a {}-d tensor", i, ndim);
    return shape[i];
  }
  int64_t numel() const;
  int64_t nbytes() const { return dtype_storage_bytes(dtype, numel()); }
  // Bytes of one row (product of all dims but the first).
  int64_t row_bytes() const;
  bool empty() const { return data == nullptr; }

  template <typename T>
  T* ptr() const { return static_cast<T*>(data); }

  // Rows [begin, begin + count) along dim 0, as a view.
  Tensor rows(int64_t begin, int64_t count) const;
  // Same storage, another shape with the same numel.
  Tensor reshape(std::initializer_list<int64_t> dims) const;

  std::string shape_string() const;  // "[2, 3]"
};

}  // namespace pagoda
