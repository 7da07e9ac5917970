// Aligned host allocations.
#include "pagoda/core/buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace pagoda {

void Buffer::Free::operator()(void* p) const { std::free(p); }

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

size_t round_up(size_t nbytes, size_t align) { return nbytes == 0 ? align : (nbytes + align - 1) / align * align; }

}  // namespace

// Huge pages only where the rounding costs little: a layer norm's 8 KB would otherwise take 2 MiB.
bool Buffer::huge_pages_worth(size_t nbytes) { return nbytes > 0 && round_up(nbytes, kHugePage) - nbytes <= nbytes / 8; }

Buffer::Buffer(size_t nbytes, Init init) : size_(nbytes) {
  const bool huge = (init == Init::kHugePages || init == Init::kZeroHugePages) && huge_pages_worth(nbytes);
  const size_t align = huge ? kHugePage : 64;
  const size_t rounded = round_up(nbytes, align);
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr) throw std::bad_alloc();
  // Best effort (THP may be off). Decode streams every weight once a token, and in 4 KB pages it ran slower
  // (TLB misses and prefetchers stopping at page ends, presumably: the VM has no counters to show which):
  // TinyLlama Q4_0 generation +9.7%, Q8_0 +3.6% in huge pages (alternating pairs, docs/PERFORMANCE.md).
  if (huge) ::madvise(p, rounded, MADV_HUGEPAGE);
  if (init == Init::kZero || init == Init::kZeroHugePages) std::memset(p, 0, rounded);
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
