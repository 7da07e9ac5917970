// GGUF block types -> internal quantized Weights (loader/gguf_quant.h), checked on hand-built blocks. The
// test writes each block from chosen codes and scales with its own encoder (gguf_block_encoder.h: every
// field placed by its bit position in the block) and computes the expected values from the chosen numbers
// with llama.cpp's dequantize_row_* formulas in fp32; the converter and the CPU kernel must reproduce them
// bit for bit.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include "pagoda/backend/cpu/linear_quant.h"
#include "gguf_block_encoder.h"
#include "pagoda/loader/gguf_quant.h"

namespace pagoda {
namespace {

using test::BlockParams;
using test::TypeCase;
using test::kCases;
using test::encode;
using test::expected_value;

uint16_t f16(float v) { return f32_to_f16(v); }

// Block `b` of row `r`: codes (5 i + 3 b + r) mod 2^bits, so that every code value and every bit position
// of every field holds both 0 and 1 across a block; scales include 0 (with a non-zero min), 63 / -128 / 127
// and values with the top bits set; mins > 0.
BlockParams make_params(const TypeCase& c, int r, int b) {
  BlockParams p;
  p.d = f16(0.03125f * static_cast<float>(1 + r + b) + 0.0017f);
  p.m = f16(c.type == GgmlType::kQ4_1 || c.type == GgmlType::kQ5_1 ? -0.37f + 0.11f * static_cast<float>(r - b)
                                                                    : 0.0213f * static_cast<float>(1 + b + 2 * r));
  const std::array<int, 8> k_scales = {0, 63, 17, 32, 1, 48, 5 + r, 33 + b};
  const std::array<int, 8> k_mins = {5, 0, 63, 40 + r, 16, 1, 62, 31 + b};
  const std::array<int, 16> q6_scales = {0, -128, 127, -1, 1, 64, -65, 33, -33, 16 + r, -17, 100, -100, 7, -7, 3 + b};
  if (c.type == GgmlType::kQ6_K) {
    p.sc = q6_scales;
  } else {
    for (int j = 0; j < 8; ++j) p.sc[j] = k_scales[j];
  }
  p.mins = k_mins;
  for (int i = 0; i < c.block_elems; ++i)
    p.codes.push_back(static_cast<uint32_t>((5 * i + 3 * b + r) % (1 << c.bits)));
  return p;
}

// A GgufTensorInfo over `bytes` ([n, k] of type c), as GgufFile would describe it.
GgufTensorInfo info_of(const TypeCase& c, const std::vector<uint8_t>& bytes, int64_t n, int64_t k) {
  GgufTensorInfo t;
  t.name = std::string("blk.0.") + c.name;
  t.type = c.type;
  t.dtype = c.type == GgmlType::kQ4_0 ? DType::kQ4_0 : DType::kU8;
  t.shape = {n, k};
  t.data = reinterpret_cast<const std::byte*>(bytes.data());
  t.nbytes = bytes.size();
  return t;
}

struct Built {
  std::vector<uint8_t> bytes;                  // [n, k / block_elems blocks]
  std::vector<std::vector<BlockParams>> params;  // [n][block]
};

Built build(const TypeCase& c, int64_t n, int64_t k) {
  Built out;
  for (int r = 0; r < n; ++r) {
    out.params.emplace_back();
    for (int b = 0; b < k / c.block_elems; ++b) {
      out.params.back().push_back(make_params(c, r, b));
      const auto block = encode(c, out.params.back().back());
      out.bytes.insert(out.bytes.end(), block.begin(), block.end());
    }
  }
  return out;
}

float expected_at(const TypeCase& c, const Built& built, int64_t r, int64_t col) {
  return expected_value(c, built.params[r][col / c.block_elems], static_cast<int>(col % c.block_elems));
}

std::vector<float> dequantize_all(const Weight& w) {
  std::vector<float> out(static_cast<size_t>(w.num_rows() * w.cols()));
  cpu::dequantize_rows(w, 0, w.num_rows(), out.data());
  return out;
}

class GgufBlocks : public ::testing::TestWithParam<TypeCase> {};

TEST_P(GgufBlocks, DequantizedValuesEqualTheBlockDefinitionBitForBit) {
  const TypeCase& c = GetParam();
  const int64_t n = 3, k = 2 * std::max<int64_t>(c.block_elems, 32);  // two blocks per row
  const Built built = build(c, n, k);
  std::vector<HostTensor> owned;
  const Weight w = convert_gguf_blocks(info_of(c, built.bytes, n, k), [](int64_t r) { return r; }, owned);
  EXPECT_EQ(w.source_format, c.name);
  EXPECT_EQ(w.in_features, k);
  EXPECT_EQ(w.num_rows(), n);
  EXPECT_EQ(w.group_size, c.group);
  EXPECT_EQ(w.scales.shape_string(), fmt::format("[{}, {}]", n, k / c.group));
  const std::vector<float> v = dequantize_all(w);
  int mismatches = 0;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t col = 0; col < k; ++col) {
      const float want = expected_at(c, built, r, col);
      const float got = v[static_cast<size_t>(r * k + col)];
      if (std::bit_cast<uint32_t>(got) != std::bit_cast<uint32_t>(want) && ++mismatches <= 10)
        ADD_FAILURE() << c.name << " row " << r << " col " << col << ": " << got << " != " << want;
    }
  EXPECT_EQ(mismatches, 0);
}

// The internal form (core/quant_scheme.h): which kind, which tensors, and how codes are stored.
TEST_P(GgufBlocks, StoredInTheDocumentedInternalForm) {
  const TypeCase& c = GetParam();
  const int64_t n = 2, k = std::max<int64_t>(c.block_elems, 64);
  const Built built = build(c, n, k);
  std::vector<HostTensor> owned;
  const Weight w = convert_gguf_blocks(info_of(c, built.bytes, n, k), [](int64_t r) { return r; }, owned);
  const bool offsets = c.type == GgmlType::kQ4_1 || c.type == GgmlType::kQ5_1 || c.type == GgmlType::kQ4_K ||
                       c.type == GgmlType::kQ5_K;
  EXPECT_EQ(w.offsets.empty(), !offsets);
  EXPECT_TRUE(w.g_idx.empty());
  auto code = [&](int64_t r, int64_t col) {
    return built.params[r][col / c.block_elems].codes[static_cast<size_t>(col % c.block_elems)];
  };
  if (c.bits == 4) {
    ASSERT_EQ(w.scheme, QuantScheme::kInt4Group);
    ASSERT_EQ(w.data.dtype, DType::kU8);
    EXPECT_EQ(w.data.shape_string(), fmt::format("[{}, {}]", n, k / 2));
    EXPECT_EQ(w.zeros.empty(), offsets);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t col = 0; col < k; ++col)
        ASSERT_EQ((w.data.ptr<uint8_t>()[r * k / 2 + col / 2] >> (4 * (col % 2))) & 15u, code(r, col)) << r << "," << col;
    if (!offsets) {
      for (int64_t i = 0; i < w.zeros.numel(); ++i) EXPECT_EQ(w.zeros.ptr<uint8_t>()[i], 8);  // Q4_0
    }
  } else {
    ASSERT_EQ(w.scheme, QuantScheme::kInt8Channel);
    ASSERT_EQ(w.data.dtype, DType::kI8);
    EXPECT_TRUE(w.zeros.empty());  // symmetric (Q5_0, Q6_K, Q8_0) or offsets (Q5_1, Q5_K)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t col = 0; col < k; ++col) {
        // Q8_0's code byte is the signed value itself; the others are stored less their fixed zero point.
        const int q = c.bits == 8 ? static_cast<int8_t>(code(r, col))
                                  : static_cast<int>(code(r, col)) - (offsets ? 0 : c.bits == 5 ? 16 : 32);
        ASSERT_EQ(w.data.ptr<int8_t>()[r * k + col], q) << r << "," << col;
      }
  }
}

// Rows taken through a row map (the Q/K un-permutation) keep their own scales and zeros / offsets, and
// Weight::rows slices offsets with the rest.
TEST_P(GgufBlocks, RowMapAndRowViewsMoveScalesAndOffsetsWithTheCodes) {
  const TypeCase& c = GetParam();
  const int64_t n = 4, k = std::max<int64_t>(c.block_elems, 64);
  const Built built = build(c, n, k);
  std::vector<HostTensor> owned;
  const Weight w = convert_gguf_blocks(info_of(c, built.bytes, n, k), [n](int64_t r) { return n - 1 - r; }, owned);
  const std::vector<float> v = dequantize_all(w);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t col = 0; col < k; ++col)
      ASSERT_EQ(v[static_cast<size_t>(r * k + col)], expected_at(c, built, n - 1 - r, col)) << r << "," << col;
  const Weight middle = w.rows(1, 2);
  EXPECT_EQ(middle.nbytes() * 2, w.nbytes());
  const std::vector<float> m = dequantize_all(middle);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t col = 0; col < k; ++col)
      ASSERT_EQ(m[static_cast<size_t>(r * k + col)], expected_at(c, built, n - 2 - r, col)) << r << "," << col;
}

// The CPU linear on the converted weight, with fp32 inputs (converted GGUF weights default to int8 activation
// blocks on the CPU, as llama.cpp: test_cpu_int8_block_linear.cpp), against a double-precision product with
// the expected values.
TEST_P(GgufBlocks, LinearMatchesTheDequantizedProduct) {
  const TypeCase& c = GetParam();
  const int64_t n = 5, k = 2 * c.block_elems, tokens = 3;
  const Built built = build(c, n, k);
  std::vector<HostTensor> owned;
  Weight w = convert_gguf_blocks(info_of(c, built.bytes, n, k), [](int64_t r) { return r; }, owned);
  // llama.cpp's activation blocks for the type: Q8_K (256) for the k-quants, Q8_0 / Q8_1 (32) for the others
  EXPECT_EQ(w.activations, c.block_elems == 256 ? ActivationQuant::kInt8SuperBlock : ActivationQuant::kInt8Block);
  w.activations = ActivationQuant::kNone;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> x(static_cast<size_t>(tokens * k));
  for (float& e : x) e = dist(rng);
  std::vector<float> out(static_cast<size_t>(tokens * n));
  cpu::linear_quant_f32(out.data(), x.data(), tokens, w);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t r = 0; r < n; ++r) {
      double want = 0, mag = 0;
      for (int64_t col = 0; col < k; ++col) {
        const double term = static_cast<double>(expected_at(c, built, r, col)) * x[static_cast<size_t>(t * k + col)];
        want += term;
        mag += std::abs(term);
      }
      EXPECT_NEAR(out[static_cast<size_t>(t * n + r)], want, 1e-5 * (1 + mag)) << t << "," << r;
    }
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Random bytes in every field (f16 scales any finite value, subnormals included) dequantized by llama.cpp's
// own dequantize_row_* (refs/gguf-blocks/, tests/data/README.md): the same fp32 bits, as rows of one block
// and as one row of all blocks.
TEST_P(GgufBlocks, MatchesLlamaCppOnRandomBlocks) {
  const TypeCase& c = GetParam();
  const std::string base = std::string(PAGODA_TEST_DATA_DIR) + "/refs/gguf-blocks/" + c.name;
  const std::vector<uint8_t> blocks = read_file(base + ".blocks");
  const std::vector<uint8_t> ref_bytes = read_file(base + ".f32");
  ASSERT_FALSE(blocks.empty()) << base;
  const int64_t num_blocks = static_cast<int64_t>(blocks.size()) / c.block_bytes;
  ASSERT_EQ(static_cast<int64_t>(ref_bytes.size()), num_blocks * c.block_elems * 4);
  std::vector<float> ref(ref_bytes.size() / 4);
  std::memcpy(ref.data(), ref_bytes.data(), ref_bytes.size());
  for (const int64_t rows : {num_blocks, int64_t{1}}) {
    std::vector<HostTensor> owned;
    const int64_t k = num_blocks * c.block_elems / rows;
    const Weight w = convert_gguf_blocks(info_of(c, blocks, rows, k), [](int64_t r) { return r; }, owned);
    const std::vector<float> v = dequantize_all(w);
    int mismatches = 0;
    for (size_t i = 0; i < v.size(); ++i)
      if (std::bit_cast<uint32_t>(v[i]) != std::bit_cast<uint32_t>(ref[i]) && ++mismatches <= 10)
        ADD_FAILURE() << c.name << " value " << i << ": " << v[i] << " != llama.cpp " << ref[i];
    EXPECT_EQ(mismatches, 0) << rows << " rows";
  }
}

INSTANTIATE_TEST_SUITE_P(Types, GgufBlocks, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(GgufBlockTypes, TableMatchesGgml) {
  for (const TypeCase& c : kCases) {
    const auto info = ggml_type_info(static_cast<uint32_t>(c.type));
    ASSERT_TRUE(info.has_value()) << c.name;
    EXPECT_EQ(info->name, c.name);
    EXPECT_EQ(info->block_elems, c.block_elems) << c.name;
    EXPECT_EQ(info->block_bytes, c.block_bytes) << c.name;
    ASSERT_TRUE(gguf_block_conversion(c.type).has_value()) << c.name;
    EXPECT_EQ(gguf_block_conversion(c.type)->bits, c.bits) << c.name;
    EXPECT_EQ(gguf_block_conversion(c.type)->group_size, c.group) << c.name;
  }
  // ggml.h's ids.
  EXPECT_EQ(ggml_type_info(3)->name, "Q4_1");
  EXPECT_EQ(ggml_type_info(6)->name, "Q5_0");
  EXPECT_EQ(ggml_type_info(7)->name, "Q5_1");
  EXPECT_EQ(ggml_type_info(12)->name, "Q4_K");
  EXPECT_EQ(ggml_type_info(13)->name, "Q5_K");
  EXPECT_EQ(ggml_type_info(14)->name, "Q6_K");
  EXPECT_FALSE(ggml_type_info(10)->loadable());  // Q2_K
  EXPECT_FALSE(ggml_type_info(11)->loadable());  // Q3_K
  EXPECT_FALSE(ggml_type_info(4).has_value());   // Q4_2, removed from ggml
  // The float types are used as stored.
  EXPECT_FALSE(gguf_block_conversion(GgmlType::kF16).has_value());
  EXPECT_FALSE(gguf_block_conversion(GgmlType::kBF16).has_value());
}

}  // namespace
}  // namespace pagoda
