// Aligned host allocations.
#include "pagoda/core/buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace pagoda {

void Buffer::Free::operator()(void* p) const { std::free(p); }

Buffer::Buffer(size_t nbytes, Init init) : size_(nbytes) {
  const size_t align = init == Init::kHugePages ? (size_t{2} << 20) : 64;
  const size_t rounded = nbytes == 0 ? align : (nbytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr) throw std::bad_alloc();
  if (init == Init::kHugePages) ::madvise(p, rounded, MADV_HUGEPAGE);  // best effort
  if (init == Init::kZero) std::memset(p, 0, rounded);
  data_.reset(p);
}

HostTensor::HostTensor(DType dtype, std::initializer_list<int64_t> dims)
    : HostTensor(dtype, std::span<const int64_t>(dims.begin(), dims.size())) {}

HostTensor::HostTensor(DType dtype, std::span<const int64_t> dims, Buffer::Init init) {
  view_ = Tensor::from_span(nullptr, dtype, dims);
  buffer_ = Buffer(static_cast<size_t>(view_.nbytes()), init);
  view_.data = buffer_.data();
}

}  // namespace pagoda
