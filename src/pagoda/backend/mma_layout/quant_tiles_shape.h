// The shape of a packed tile matrix (quant_tiles.h has the layout): plain C++17, shared with the CUDA kernels.
#pragma once

#include <cstdint>

namespace pagoda {

enum class TileCodes : uint8_t {
  kU4,    // 4-bit unsigned codes 0..15 (kInt4Group)
  kI8,    // signed 8-bit codes (kInt8Channel, GGUF Q8_0)
  kE4M3,  // FP8 e4m3 codes (kFp8Channel)
};

constexpr int kTileRows = 16;
constexpr int kTileChunkCols = 64;  // columns per chunk
constexpr int kTileStepCols = 16;   // columns per k-step

// Vectors of 16 bytes per lane per chunk.
constexpr int tile_vectors_per_chunk(TileCodes c) { return c == TileCodes::kU4 ? 1 : 2; }

struct QuantTilesShape {
  TileCodes codes = TileCodes::kU4;
  bool offsets = false;    // the offsets form (value = q * s - m) instead of zeros
  int64_t n = 0, k = 0;    // the matrix [N, K]
  int64_t group_size = 0;  // columns per params group (a multiple of 16, or K)

  int64_t tiles() const { return (n + kTileRows - 1) / kTileRows; }
  int64_t chunks() const { return (k + kTileChunkCols - 1) / kTileChunkCols; }
  int64_t groups() const { return (k + group_size - 1) / group_size; }
  int64_t code_bytes() const { return tiles() * chunks() * tile_vectors_per_chunk(codes) * 32 * 16; }
  int64_t param_floats() const { return tiles() * groups() * kTileRows * 2; }
};

}  // namespace pagoda
