// QuantTiles: a quantized linear weight in the order the GPU's tensor-core GEMV reads it (kernels/quant_gemv.h).
// One layout per code width, converted once at upload from the internal representation (core/quant_scheme.h),
// whatever file format that came from; host-side and plain C++, so the CPU tests check the packing.
//
// The kernel runs mma.sync m16n8k16 (bf16 in, fp32 out) with the weight as the A operand: a tile is 16 rows
// (out_features) by 16 columns (a "k-step" of in_features), and each lane of a warp holds 8 of its values,
// rows p and p + 8 of the tile by columns 4t .. 4t + 3 of the k-step (lane = 4p + t; the MMA's columns
// 2t, 2t + 1, 2t + 8, 2t + 9 stand for those four, and the activations are read in the same order, so the
// product is unchanged). Tile position p holds row 2p for p < 8 and row 2(p - 8) + 1 for p >= 8, so a lane's
// two rows are a row pair (2j, 2j + 1): what the SwiGLU and RoPE epilogues combine.
//
//   codes   [tiles][chunks][V][32 lanes] 16-byte vectors, a chunk being 64 columns (4 k-steps). V = 1 for
//           4-bit codes: word s of a lane's vector is k-step s, its nibble pairs (bits 4i and 16 + 4i) the
//           MMA registers i = 0..3: (row p, cols 0 and 1), (row p + 8, cols 0, 1), (row p, cols 2, 3),
//           (row p + 8, cols 2, 3). V = 2 for 8-bit codes: vector v holds k-steps 2v and 2v + 1, each as the
//           words (row p, cols 0..3 by byte) and (row p + 8, cols 0..3).
//   params  [tiles][groups][16 positions] {scale, zero or offset} as two floats, F32:
//           zeros form   value = (q - z) * s   (z: the zero point; 0 for symmetric int8 and FP8)
//           offsets form value = q * s - m     (GGML's scale-and-min types)
// Rows past N (to a whole tile) are zero codes with zero params; columns past K (to a whole chunk) are zero
// codes, never read (K is a multiple of 16: the kernels stop at its last k-step).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pagoda/backend/mma_layout/quant_tiles_shape.h"
#include "pagoda/loader/model_weights.h"

namespace pagoda {

struct HostQuantTiles {
  QuantTilesShape shape;
  std::vector<uint8_t> codes;  // code_bytes()
  std::vector<float> params;   // param_floats()
};

// One row of the packed matrix: row `row` of `weight`.
struct TileRowSource {
  const Weight* weight = nullptr;
  int64_t row = 0;
};

// Every row of `w`, in order: the sources of packing one weight as it is.
std::vector<TileRowSource> tile_rows(const Weight& w);

// Why rows of these weights cannot be packed (empty when they can): every source must share the scheme,
// group size and K; act-order (g_idx) has no tile layout (the CUDA upload sorts such weights by group first,
// backend/cpu/act_order.h, where it can); K and the group size must be multiples of 16.
// Quantized schemes and GGUF Q8_0 qualify.
std::string quant_tiles_unsupported(std::span<const Weight* const> weights);

// Packs the rows (one source each, in output order) into the tile layout. The zeros form is kept when every
// source has it; otherwise zero points become offsets (m = z * s).
HostQuantTiles pack_quant_tiles(std::span<const TileRowSource> rows);

// What the packed matrix holds for (row, col), col < K: the code (0..15, -128..127, or the e4m3 byte) and its group's
// params.
struct QuantTileEntry {
  int32_t code;
  float scale, zero_or_offset;
};
QuantTileEntry quant_tile_entry(const HostQuantTiles& tiles, int64_t row, int64_t col);

// The value at (row, col), col < K, as the kernel defines it, in fp32: the reference the packing is tested against.
float quant_tile_value(const HostQuantTiles& tiles, int64_t row, int64_t col);

}  // namespace pagoda
