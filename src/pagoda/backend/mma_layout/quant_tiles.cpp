// Packing quantized weights into the tensor-core GEMV's tile layout (quant_tiles.h). Reads each source row's
// codes and {scale, zero | offset} as the internal representation defines them (core/quant_scheme.h).
#include "pagoda/backend/mma_layout/quant_tiles.h"

#include <fmt/format.h>

#include "pagoda/core/check.h"

namespace pagoda {
namespace {

TileCodes codes_of(const Weight& w) {
  switch (w.scheme) {
    case QuantScheme::kInt4Group: return TileCodes::kU4;
    case QuantScheme::kInt8Channel: return TileCodes::kI8;
    default: return TileCodes::kE4M3;
  }
}

int64_t group_size_of(const Weight& w) { return w.group_size; }
bool has_offsets(const Weight& w) { return !w.offsets.empty(); }

// One source row, read as codes and params.
class RowReader {
 public:
  RowReader(const Weight& w, int64_t row) : w_(w), row_(row), k_(w.cols()), groups_(w.scales.dim(1)) {}

  // The code of column c: 0..15 (U4), -128..127 (I8), the e4m3 byte (E4M3).
  int32_t code(int64_t c) const {
    switch (w_.scheme) {
      case QuantScheme::kInt4Group:
        return (w_.data.ptr<const uint8_t>()[row_ * (k_ / 2) + c / 2] >> (4 * (c % 2))) & 0xf;
      case QuantScheme::kInt8Channel: return w_.data.ptr<const int8_t>()[row_ * k_ + c];
      default: return w_.data.ptr<const uint8_t>()[row_ * k_ + c];
    }
  }
  float scale(int64_t g) const { return w_.scales.ptr<const float>()[row_ * groups_ + g]; }
  // The zero point (zeros form; 0 when there is none).
  float zero(int64_t g) const {
    if (w_.zeros.empty()) return 0.0f;
    if (w_.scheme == QuantScheme::kInt4Group) return w_.zeros.ptr<const uint8_t>()[row_ * groups_ + g];
    return static_cast<float>(w_.zeros.ptr<const int32_t>()[row_ * groups_ + g]);
  }
  float offset(int64_t g) const { return w_.offsets.ptr<const float>()[row_ * groups_ + g]; }

 private:
  const Weight& w_;
  int64_t row_, k_, groups_;
};

// Tile position p <-> row of the tile: p < 8 holds row 2p, p >= 8 row 2(p - 8) + 1.
int row_of_position(int p) { return p < 8 ? 2 * p : 2 * (p - 8) + 1; }
int position_of_row(int r) { return r % 2 == 0 ? r / 2 : r / 2 + 8; }

// Byte offset of lane `lane`'s vector v of chunk c in tile `tile`.
int64_t vector_offset(const QuantTilesShape& s, int64_t tile, int64_t chunk, int v, int lane) {
  const int V = tile_vectors_per_chunk(s.codes);
  return (((tile * s.chunks() + chunk) * V + v) * 32 + lane) * 16;
}

// Where the code of (tile position p, column col) lives: byte offset and, for 4-bit codes, the bit shift.
struct CodeSlot {
  int64_t byte;
  int shift;
};

CodeSlot code_slot(const QuantTilesShape& s, int64_t tile, int p, int64_t col) {
  const int64_t step = col / kTileStepCols, chunk = step / 4;
  const int in_step = static_cast<int>(col % kTileStepCols), t = in_step / 4, i = in_step % 4;
  const int lane = 4 * (p % 8) + t, upper = p >= 8 ? 1 : 0;
  const int step_in_chunk = static_cast<int>(step % 4);
  if (s.codes == TileCodes::kU4) {  // word = step, nibble pair (i / 2) * 2 + upper, half i % 2
    const int pair = (i / 2) * 2 + upper;
    const int bit = (i % 2) * 16 + 4 * pair;
    return {vector_offset(s, tile, chunk, 0, lane) + 4 * step_in_chunk + bit / 8, bit % 8};
  }
  const int v = step_in_chunk / 2, word = (step_in_chunk % 2) * 2 + upper;
  return {vector_offset(s, tile, chunk, v, lane) + 4 * word + i, 0};
}

int64_t param_index(const QuantTilesShape& s, int64_t tile, int64_t group, int p) {
  return ((tile * s.groups() + group) * kTileRows + p) * 2;
}

}  // namespace

std::vector<TileRowSource> tile_rows(const Weight& w) {
  std::vector<TileRowSource> rows;
  rows.reserve(static_cast<size_t>(w.num_rows()));
  for (int64_t r = 0; r < w.num_rows(); ++r) rows.push_back({&w, r});
  return rows;
}

std::string quant_tiles_unsupported(std::span<const Weight* const> weights) {
  if (weights.empty()) return "no weights";
  const Weight& first = *weights[0];
  for (const Weight* w : weights) {
    if (!w->quantized()) return fmt::format("{} weights are not quantized", dtype_name(w->data.dtype));
    if (!w->g_idx.empty())  // (the upload sorts act-order parts by group first where it can: backend/cpu/act_order.h)
      return "act-order (g_idx) weights whose groups are not group_size columns each, or fused parts with different "
             "g_idx, have no tile layout";
    if (codes_of(*w) != codes_of(first) || group_size_of(*w) != group_size_of(first) || w->cols() != first.cols())
      return "fused parts differ in scheme, group size or in_features";
  }
  const int64_t k = first.cols(), g = group_size_of(first);
  if (k % kTileStepCols != 0) return fmt::format("in_features {} is not a multiple of {}", k, kTileStepCols);
  if (g != k && g % kTileStepCols != 0) return fmt::format("group size {} is not a multiple of {}", g, kTileStepCols);
  return "";
}

HostQuantTiles pack_quant_tiles(std::span<const TileRowSource> rows) {
  PAGODA_CHECK(!rows.empty(), "pack_quant_tiles: no rows");
  const Weight& first = *rows[0].weight;
  HostQuantTiles out;
  QuantTilesShape& s = out.shape;
  s.codes = codes_of(first);
  s.n = static_cast<int64_t>(rows.size());
  s.k = first.cols();
  s.group_size = group_size_of(first);
  for (const TileRowSource& r : rows) s.offsets = s.offsets || has_offsets(*r.weight);
  out.codes.assign(static_cast<size_t>(s.code_bytes()), 0);
  out.params.assign(static_cast<size_t>(s.param_floats()), 0.0f);

  const int64_t tiles = s.tiles(), groups = s.groups();
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t tile = 0; tile < tiles; ++tile) {
    for (int p = 0; p < kTileRows; ++p) {
      const int64_t row = tile * kTileRows + row_of_position(p);
      if (row >= s.n) continue;
      const TileRowSource& src = rows[static_cast<size_t>(row)];
      const RowReader reader(*src.weight, src.row);
      const bool src_offsets = has_offsets(*src.weight);
      for (int64_t g = 0; g < groups; ++g) {
        const float scale = reader.scale(g);
        float zm = src_offsets ? reader.offset(g) : reader.zero(g);
        if (s.offsets && !src_offsets) zm *= scale;  // m = z * s
        float* param = out.params.data() + param_index(s, tile, g, p);
        param[0] = scale;
        param[1] = zm;
      }
      for (int64_t col = 0; col < s.k; ++col) {
        const CodeSlot slot = code_slot(s, tile, p, col);
        const int32_t q = reader.code(col);
        if (s.codes == TileCodes::kU4) {
          out.codes[static_cast<size_t>(slot.byte)] |= static_cast<uint8_t>(q << slot.shift);
        } else {
          out.codes[static_cast<size_t>(slot.byte)] = static_cast<uint8_t>(q);
        }
      }
    }
  }
  return out;
}

QuantTileEntry quant_tile_entry(const HostQuantTiles& tiles, int64_t row, int64_t col) {
  const QuantTilesShape& s = tiles.shape;
  PAGODA_CHECK(row >= 0 && row < s.tiles() * kTileRows && col >= 0 && col < s.k, "quant_tile_entry: ({}, {}) of [{}, {}]",
               row, col, s.n, s.k);
  const int64_t tile = row / kTileRows;
  const int p = position_of_row(static_cast<int>(row % kTileRows));
  const CodeSlot slot = code_slot(s, tile, p, col);
  const uint8_t byte = tiles.codes[static_cast<size_t>(slot.byte)];
  const float* param = tiles.params.data() + param_index(s, tile, col / s.group_size, p);
  const int32_t code = s.codes == TileCodes::kU4   ? (byte >> slot.shift) & 0xf
                       : s.codes == TileCodes::kI8 ? static_cast<int8_t>(byte)
                                                   : byte;
  return {code, param[0], param[1]};
}

float quant_tile_value(const HostQuantTiles& tiles, int64_t row, int64_t col) {
  const QuantTileEntry e = quant_tile_entry(tiles, row, col);
  if (tiles.shape.codes == TileCodes::kE4M3) return f8e4m3_to_f32(static_cast<uint8_t>(e.code)) * e.scale;
  const float q = static_cast<float>(e.code);
  return tiles.shape.offsets ? q * e.scale - e.zero_or_offset : (q - e.zero_or_offset) * e.scale;
}

}  // namespace pagoda
