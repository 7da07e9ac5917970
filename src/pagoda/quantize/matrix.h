// Matrix: a dense fp32 row-major matrix owned on the host, the form every weight takes while it is quantized.
#pragma once

#include <cstdint>
#include <vector>

namespace pagoda::quantizer {

struct Matrix {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<float> data{};  // [rows, cols]

  Matrix() = default;
  Matrix(int64_t r, int64_t c) : rows(r), cols(c), data(static_cast<size_t>(r * c), 0.0f) {}
  float* row(int64_t r) { return data.data() + r * cols; }
  const float* row(int64_t r) const { return data.data() + r * cols; }
  float& at(int64_t r, int64_t c) { return data[static_cast<size_t>(r * cols + c)]; }
  float at(int64_t r, int64_t c) const { return data[static_cast<size_t>(r * cols + c)]; }
};

}  // namespace pagoda::quantizer
