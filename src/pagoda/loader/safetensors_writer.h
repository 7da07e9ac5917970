// write_safetensors: the inverse of SafetensorsCheckpoint for one file. The header is laid out as the
// reference packer (tests/data/models/quant/, make_quant_refs.py) and Python's json.dumps write it: compact
// JSON, tensors sorted by name, `__metadata__` last, padded with spaces to a multiple of 8 bytes.
#pragma once

#include <cstddef>
#include <cstring>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pagoda/core/dtype.h"

namespace pagoda {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;     // F32, F16, BF16, I32, I64, U8, I8 or F8_E4M3
  std::vector<int64_t> shape{};  // row-major
  std::vector<std::byte> data{}; // little-endian, exactly numel * dtype size bytes
};

// A tensor from typed host values (the bytes are copied).
template <typename T>
SafetensorsEntry make_entry(std::string name, DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  SafetensorsEntry e{std::move(name), dtype, std::move(shape), {}};
  e.data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(e.data.data(), values.data(), e.data.size());
  return e;
}

// The header JSON (without the 8-byte length and padding) for `entries` with `metadata` (string pairs,
// written in the order given; empty: no __metadata__).
std::string safetensors_header(const std::vector<SafetensorsEntry>& entries,
                               const std::vector<std::pair<std::string, std::string>>& metadata);

// Writes `path`; a LoadError naming it when it cannot be written or an entry's size does not match its shape.
void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                       const std::vector<std::pair<std::string, std::string>>& metadata);

}  // namespace pagoda
