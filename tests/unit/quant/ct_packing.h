// compressed-tensors' int32 packing, written bit by bit from its definition and not from the loader's
// unpacking: pack_to_int32 (compressors/pack_quantized/helpers.py, vllm-project/compressed-tensors @ac8e2ba)
// stores each signed b-bit value v as v + 2^(b-1) and packs a row densely, element i at global bit i*b of the
// row (bit 0 = the least significant bit of word 0), ceil(elements * b / 32) words a row; packed_dim=0 packs
// the columns instead (transpose, pack, transpose back).
#pragma once

#include <cstdint>
#include <vector>

namespace pagoda::test {

// The stream of `count` values value(0), value(1), ... at `bits` bits each.
template <typename Fn>
std::vector<uint32_t> ct_pack_stream(int64_t count, int bits, Fn&& value) {
  std::vector<uint32_t> words(static_cast<size_t>((count * bits + 31) / 32), 0);
  for (int64_t i = 0; i < count; ++i) {
    const auto u = static_cast<uint32_t>(value(i) + (1 << (bits - 1)));
    for (int b = 0; b < bits; ++b) {
      const int64_t bit = i * bits + b;
      if ((u >> b) & 1u) words[static_cast<size_t>(bit / 32)] |= 1u << (bit % 32);
    }
  }
  return words;
}

// weight_packed: row-major signed codes [n, k] -> I32 [n, ceil(k*bits/32)], one stream per row.
inline std::vector<uint32_t> ct_pack_rows(const std::vector<int>& codes, int64_t n, int64_t k, int bits) {
  std::vector<uint32_t> out;
  for (int64_t r = 0; r < n; ++r) {
    const std::vector<uint32_t> row = ct_pack_stream(k, bits, [&](int64_t i) { return codes[r * k + i]; });
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

// weight_zero_point: row-major signed zero points [n, groups] -> I32 [ceil(n*bits/32), groups], one stream
// per column (packed_dim=0), stored row-major.
inline std::vector<uint32_t> ct_pack_columns(const std::vector<int>& zeros, int64_t n, int64_t groups, int bits) {
  const int64_t words = (n * bits + 31) / 32;
  std::vector<uint32_t> out(static_cast<size_t>(words * groups), 0);
  for (int64_t g = 0; g < groups; ++g) {
    const std::vector<uint32_t> col = ct_pack_stream(n, bits, [&](int64_t i) { return zeros[i * groups + g]; });
    for (int64_t w = 0; w < words; ++w) out[static_cast<size_t>(w * groups + g)] = col[static_cast<size_t>(w)];
  }
  return out;
}

}  // namespace pagoda::test
