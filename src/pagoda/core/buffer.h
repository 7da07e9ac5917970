// Buffer: owned, 64-byte aligned host memory, and HostTensor: a Buffer with a Tensor view over it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>

#include "pagoda/core/tensor.h"

namespace pagoda {

class Buffer {
 public:
  Buffer() = default;
  // kHugePages (weights every token streams): uninitialized; 2 MiB aligned and advised for transparent huge
  // pages when rounding the size up to 2 MiB adds at most an eighth (smaller ones: as kUninitialized).
  // kZeroHugePages: the same, zeroed.
  enum class Init { kZero, kUninitialized, kHugePages, kZeroHugePages };
  explicit Buffer(size_t nbytes, Init init = Init::kZero);
  // Whether kHugePages gives `nbytes` huge pages: rounding it up to 2 MiB adds at most an eighth.
  static bool huge_pages_worth(size_t nbytes);
  void* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free { void operator()(void* p) const; };
  std::unique_ptr<void, Free> data_;
  size_t size_ = 0;
};

class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::initializer_list<int64_t> dims);
  HostTensor(DType dtype, std::span<const int64_t> dims, Buffer::Init init = Buffer::Init::kZero);
  const Tensor& view() const { return view_; }
  template <typename T>
  T* ptr() const { return view_.ptr<T>(); }

 private:
  Buffer buffer_;
  Tensor view_;
};

}  // namespace pagoda
