// The tensor-core GEMV's tile layout (backend/mma_layout/quant_tiles.h): every value of every form reads back
// from the packed tiles exactly as the CPU reference dequantizes it (cpu::dequantize_rows), rows that pad the
// last tile are zero, and fused matrices (rows from several weights, in any order)
// keep each row's own codes and params.
#include <gtest/gtest.h>

#include <vector>

#include "pagoda/backend/cpu/cpu_kernels.h"
#include "pagoda/backend/cpu/linear_quant.h"
#include "pagoda/backend/mma_layout/quant_tiles.h"
#include "random_quant_weight.h"

namespace pagoda {
namespace {

using test::QuantForm;
using test::RandomQuantWeight;

// The CPU reference's fp32 values of w [N, K].
std::vector<float> reference_values(const Weight& w) {
  const int64_t n = w.num_rows(), k = w.cols();
  std::vector<float> v(static_cast<size_t>(n * k));
  if (w.quantized()) {
    cpu::dequantize_rows(w, 0, n, v.data());
  } else {
    const int64_t row_bytes = dtype_storage_bytes(w.data.dtype, k);
    for (int64_t r = 0; r < n; ++r)
      cpu::dequantize_row(static_cast<const char*>(w.data.data) + r * row_bytes, w.data.dtype, k, v.data() + r * k);
  }
  return v;
}

struct Case {
  QuantForm form;
  int64_t n, k, group;
};

TEST(QuantTiles, EveryFormReadsBackAsTheCpuReference) {
  // N not a multiple of 16, K not a multiple of 64, groups of 16 and 32 (GGUF), 64 and 128 (AWQ / GPTQ), K
  // (per channel) and FP8's 128-column blocks that do not divide K.
  const Case cases[] = {
      {QuantForm::kInt4Zeros, 40, 256, 128},    {QuantForm::kInt4Zeros, 16, 96, 32},
      {QuantForm::kInt4Offsets, 33, 160, 32},   {QuantForm::kInt8Symmetric, 24, 112, 16},
      {QuantForm::kInt8Symmetric, 8, 64, 64},   {QuantForm::kInt8Zeros, 17, 128, 64},
      {QuantForm::kInt8Offsets, 32, 80, 16},    {QuantForm::kFp8, 48, 208, 208},
      {QuantForm::kFp8, 20, 208, 128},          {QuantForm::kInt8Symmetric, 30, 96, 32},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << test::quant_form_name(c.form) << " n " << c.n << " k " << c.k << " g "
                                      << c.group);
    RandomQuantWeight rw(c.form, c.n, c.k, c.group, 11 + c.n);
    ASSERT_EQ(quant_tiles_unsupported(std::vector<const Weight*>{&rw.weight}), "");
    const HostQuantTiles tiles = pack_quant_tiles(tile_rows(rw.weight));
    const QuantTilesShape& s = tiles.shape;
    EXPECT_EQ(s.n, c.n);
    EXPECT_EQ(s.k, c.k);
    EXPECT_EQ(tiles.codes.size(), static_cast<size_t>(s.code_bytes()));
    const std::vector<float> want = reference_values(rw.weight);
    int mismatches = 0;
    for (int64_t r = 0; r < c.n; ++r)
      for (int64_t col = 0; col < c.k; ++col)
        if (quant_tile_value(tiles, r, col) != want[r * c.k + col] && ++mismatches < 5)
          ADD_FAILURE() << "row " << r << " col " << col << ": " << quant_tile_value(tiles, r, col) << " vs "
                        << want[r * c.k + col];
    EXPECT_EQ(mismatches, 0);
    // Rows that pad the last tile: zero codes, zero params. (Columns past K, to a whole chunk, are never read:
    // the kernels stop at the last k-step.)
    for (int64_t r = c.n; r < s.tiles() * kTileRows; ++r)
      for (int64_t col = 0; col < c.k; ++col) EXPECT_EQ(quant_tile_value(tiles, r, col), 0.0f);
  }
}

TEST(QuantTiles, EveryCodeByteIsUsedOnce) {
  // A permutation check: with all codes 0xf (4-bit) every byte of a full tile is 0xff, so no two values share
  // a nibble and none is left out.
  RandomQuantWeight rw(QuantForm::kInt4Zeros, 16, 64, 64, 3);
  for (int64_t i = 0; i < rw.weight.data.numel(); ++i) rw.weight.data.ptr<uint8_t>()[i] = 0xff;
  const HostQuantTiles tiles = pack_quant_tiles(tile_rows(rw.weight));
  ASSERT_EQ(tiles.codes.size(), 512u);
  for (uint8_t b : tiles.codes) EXPECT_EQ(b, 0xff);
}

TEST(QuantTiles, FusedRowsKeepTheirSourcesAndMixedFormsBecomeOffsets) {
  // Rows interleaved from two weights, as the gate-up fusion does; one has zero points and one offsets,
  // so the packed matrix takes the offsets form (m = z * s), equal to the reference within fp32 rounding.
  RandomQuantWeight a(QuantForm::kInt4Zeros, 24, 128, 32, 5), b(QuantForm::kInt4Offsets, 24, 128, 32, 6);
  std::vector<TileRowSource> rows;
  for (int64_t r = 0; r < 24; ++r) {
    rows.push_back({&a.weight, r});
    rows.push_back({&b.weight, 23 - r});
  }
  const HostQuantTiles tiles = pack_quant_tiles(rows);
  EXPECT_TRUE(tiles.shape.offsets);
  const std::vector<float> va = reference_values(a.weight), vb = reference_values(b.weight);
  for (int64_t r = 0; r < 48; ++r)
    for (int64_t col = 0; col < 128; ++col) {
      const float want = r % 2 == 0 ? va[(r / 2) * 128 + col] : vb[(23 - r / 2) * 128 + col];
      EXPECT_NEAR(quant_tile_value(tiles, r, col), want, 1e-6f * (1.0f + std::fabs(want))) << r << "," << col;
    }
}

TEST(QuantTiles, UnsupportedWeightsAreNamed) {
  RandomQuantWeight a(QuantForm::kInt4Zeros, 16, 128, 64, 1), b(QuantForm::kInt4Zeros, 16, 128, 32, 2),
      c(QuantForm::kInt8Symmetric, 16, 128, 64, 3);
  EXPECT_NE(quant_tiles_unsupported(std::vector<const Weight*>{&a.weight, &b.weight}), "");  // group sizes
  EXPECT_NE(quant_tiles_unsupported(std::vector<const Weight*>{&a.weight, &c.weight}), "");  // code widths
  Weight act_order = a.weight;
  act_order.g_idx = a.weight.scales;  // any non-empty tensor: act order
  EXPECT_NE(quant_tiles_unsupported(std::vector<const Weight*>{&act_order}), "");
  RandomQuantWeight odd(QuantForm::kInt8Symmetric, 16, 120, 120, 4);  // K % 16 != 0
  EXPECT_NE(quant_tiles_unsupported(std::vector<const Weight*>{&odd.weight}), "");
}

}  // namespace
}  // namespace pagoda
