// Aligned host allocations.
#include "pagoda/core/buffer.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace pagoda {

void Buffer::Free::operator()(void* p) const { std::free(p); }

Buffer::Buffer(size_t nbytes, Init init) : size_(nbytes) {
  const size_t rounded = nbytes == 0 ? 64 : (nbytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr) throw std::bad_alloc();
  if (init == Init::kZero) std::memset(p, 0, rounded);
  data_.reset(p);
}

HostTensor::HostTensor(DType dtype, std::initializer_list<int64_t> dims)
    : HostTensor(dtype, std::span<const int64_t>(dims.begin(), dims.size())) {}

HostTensor::HostTensor(DType dtype, std::span<const int64_t> dims) {
  view_ = Tensor::from_span(nullptr, dtype, dims);
  buffer_ = Buffer(static_cast<size_t>(view_.nbytes()));
  view_.data = buffer_.data();
}

}  // namespace pagoda
