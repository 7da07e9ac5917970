// Tensor view helpers.
#include "pagoda/core/tensor.h"

#include <fmt/format.h>

namespace pagoda {

Tensor::Tensor(void* data_, DType dtype_, std::initializer_list<int64_t> dims, Device device_)
    : data(data_), dtype(dtype_), device(device_) {
  PAGODA_CHECK(dims.size() <= kMaxDims, "tensor with {} dims", dims.size());
  for (int64_t d : dims) shape[ndim++] = d;
}

Tensor Tensor::from_span(void* data, DType dtype, std::span<const int64_t> dims, Device device) {
  PAGODA_CHECK(dims.size() <= kMaxDims, "tensor with {} dims", dims.size());
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  for (int64_t d : dims) t.shape[t.ndim++] = d;
  return t;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

int64_t Tensor::row_bytes() const {
  PAGODA_CHECK(ndim >= 1);
  int64_t n = 1;
  for (int i = 1; i < ndim; ++i) n *= shape[i];
  return dtype_storage_bytes(dtype, n);
}

Tensor Tensor::rows(int64_t begin, int64_t count) const {
  PAGODA_CHECK(ndim >= 1 && begin >= 0 && count >= 0 && begin + count <= shape[0], "rows {}+{} of {}", begin,
               count, shape_string());
  Tensor t = *this;
  t.shape[0] = count;
  t.data = static_cast<char*>(data) + begin * row_bytes();
  return t;
}

Tensor Tensor::reshape(std::initializer_list<int64_t> dims) const {
  Tensor t(data, dtype, dims, device);
  PAGODA_CHECK(t.numel() == numel(), "reshape {} -> {}", shape_string(), t.shape_string());
  return t;
}

std::string Tensor::shape_string() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return s + "]";
}

}  // namespace pagoda
