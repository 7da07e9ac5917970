// What the GPU tests of the quantized kernels share (test_quant_gemv.cpp, test_quant_gemm.cpp): packed tiles on the
// device, a case of form and shape, the CPU's values of a packed matrix, and the check of a product against float64
// sums of them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "../backend/random_quant_weight.h"
#include "cuda_test_util.h"
#include "pagoda/backend/mma_layout/quant_tiles.h"
#include "pagoda/kernels/quant_gemv.h"

namespace pagoda::test {

// Packed tiles on the device.
struct DeviceTiles {
  explicit DeviceTiles(const HostQuantTiles& t) : codes(t.codes), params(t.params) {
    m.codes = codes.get();
    m.params = params.get();
    m.shape = t.shape;
  }
  DeviceArray<uint8_t> codes;
  DeviceArray<float> params;
  kernels::QuantMatrix m;
};

struct QuantCase {
  QuantForm form;
  int n, k, group;
};

// Forms x shapes both kernels take: N odd and below a tile, K a multiple of 16 only, the GGUF group sizes (16, 32),
// AWQ/GPTQ's (64, 128), per channel, FP8 blocks that do not divide K, Llama's 4096 x 4096 (K split between warps or
// blocks) and a long K (the down projection's 14,336).
inline constexpr QuantCase kQuantCases[] = {
    {QuantForm::kInt4Zeros, 4096, 4096, 128}, {QuantForm::kInt4Zeros, 37, 208, 16},
    {QuantForm::kInt4Zeros, 100, 1024, 64},   {QuantForm::kInt4Offsets, 70, 544, 32},
    {QuantForm::kInt8Symmetric, 48, 1040, 16}, {QuantForm::kInt8Zeros, 33, 512, 128},
    {QuantForm::kInt8Offsets, 24, 96, 32},    {QuantForm::kInt8Symmetric, 200, 2048, 2048},
    {QuantForm::kFp8, 96, 4112, 4112},        {QuantForm::kFp8, 40, 336, 128},
    {QuantForm::kInt8Symmetric, 64, 4096, 32}, {QuantForm::kInt4Zeros, 8, 16, 16},
    {QuantForm::kInt4Zeros, 50, 1152, 1152},  {QuantForm::kInt4Zeros, 64, 14336, 128},
};

// Copies of a random weight [n, k] of a bandwidth table (4-bit groups of 128, other forms one group a row), enough to
// exceed 256 MiB, so that calls cycled over them read HBM rather than L2; and the bytes of one.
struct WeightCopies {
  std::vector<std::unique_ptr<DeviceTiles>> copies;
  size_t bytes = 0;
};

inline WeightCopies weight_copies(QuantForm form, int n, int k) {
  RandomQuantWeight rw(form, n, k, form == QuantForm::kInt4Zeros ? 128 : k, 5);
  const HostQuantTiles tiles = pack_quant_tiles(tile_rows(rw.weight));
  WeightCopies w;
  w.bytes = tiles.codes.size() + tiles.params.size() * sizeof(float);
  const size_t count = std::max<size_t>(1, (size_t{256} << 20) / w.bytes);
  for (size_t i = 0; i < count; ++i) w.copies.push_back(std::make_unique<DeviceTiles>(tiles));
  return w;
}

inline bool offsets_form(QuantForm f) { return f == QuantForm::kInt4Offsets || f == QuantForm::kInt8Offsets; }

// The values [n, k] of the packed matrix as the kernels define them (fp32), and for the offsets form |m| of each
// value's group (zeros otherwise: the magnitude the m x terms add to a sum).
struct TileValues {
  std::vector<float> values, offsets;
};

inline TileValues tile_values(const HostQuantTiles& t) {
  const int64_t n = t.shape.n, k = t.shape.k;
  TileValues v{std::vector<float>(static_cast<size_t>(n * k)), std::vector<float>(static_cast<size_t>(n * k))};
  for (int64_t r = 0; r < n; ++r)
    for (int64_t col = 0; col < k; ++col) {
      v.values[r * k + col] = quant_tile_value(t, r, col);
      if (t.shape.offsets) v.offsets[r * k + col] = std::fabs(quant_tile_entry(t, r, col).zero_or_offset);
    }
  return v;
}

// Checks out [T, n] (bf16) against float64 sums of x [T, k] (bf16) times the values, for tokens 0, token_step, .. and
// rows 0, row_step, ..: within half a bf16 step of the result and fp32 sums on the tensor cores. Reports the first
// three mismatches; returns how many there were.
inline int count_mismatches(const std::vector<uint16_t>& out, const std::vector<uint16_t>& x, const TileValues& v,
                            int64_t n, int64_t k, int num_tokens, int token_step, int64_t row_step) {
  int bad = 0;
  for (int t = 0; t < num_tokens; t += token_step)
    for (int64_t r = 0; r < n; r += row_step) {
      double want = 0, mag = 0;
      for (int64_t col = 0; col < k; ++col) {
        const double xv = bf16_to_f32(x[t * k + col]), w = v.values[r * k + col];
        want += xv * w;
        mag += std::fabs(xv) * (std::fabs(w) + 2.0 * v.offsets[r * k + col]);  // offsets: s q x and m x terms
      }
      const double g = bf16_to_f32(out[t * n + r]);
      if (!(std::fabs(g - want) <= 0.0040 * std::fabs(want) + 1e-4 * mag + 1e-6) && ++bad <= 3)
        ADD_FAILURE() << "token " << t << " row " << r << ": got " << g << ", want " << want;
    }
  return bad;
}

}  // namespace pagoda::test
