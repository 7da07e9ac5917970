// Each converter on tiny hand-built checkpoints whose packing is written out by hand from FORMATS.md, the
// e4m3 decoder, and the CPU kernel against a double-precision product of the dequantized weights.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "pagoda/backend/cpu/linear_quant.h"
#include "tiny_linear_checkpoint.h"

namespace pagoda {
namespace {

using test::dequantize_all;
using test::f16_bytes;
using test::SafetensorsWriter;
using test::TinyCheckpoint;
using test::to_bytes;

// AWQ: 8 columns (out_features) x 2 rows of K. q(n, k) = n + 3k, z(n) = n % 4 + 1, s(n) = 0.5 + n / 4.
// Nibble i of a word holds column kAwqOrder[i] = [0, 2, 4, 6, 1, 3, 5, 7][i], so k = 0 packs as 0x75316420.
TEST(AwqConverter, NibbleOrderFollowsAutoAwq) {
  SafetensorsWriter w;
  w.tensor("m.qweight", "I32", {2, 1}, to_bytes(std::vector<uint32_t>{0x75316420u, 0xA8649753u}));
  w.tensor("m.qzeros", "I32", {1, 1}, to_bytes(std::vector<uint32_t>{0x42423131u}));
  w.tensor("m.scales", "F16", {1, 8}, f16_bytes({0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.25f}));
  TinyCheckpoint t;
  const QuantConfig config{.method = QuantMethod::kAwq, .name = "awq", .bits = 4, .group_size = 2};
  const Weight weight = t.load(w, config, 8, 2);
  ASSERT_EQ(weight.scheme, QuantScheme::kInt4Group);
  EXPECT_EQ(weight.data.shape_string(), "[8, 1]");  // [N, K/2]
  EXPECT_EQ(weight.scales.shape_string(), "[8, 1]");
  const std::vector<float> v = dequantize_all(weight);
  for (int n = 0; n < 8; ++n) {
    // Internal form: k = 0 in the low nibble.
    EXPECT_EQ(weight.data.ptr<uint8_t>()[n], static_cast<uint8_t>(n | ((n + 3) << 4))) << "column " << n;
    for (int k = 0; k < 2; ++k)
      EXPECT_EQ(v[n * 2 + k], static_cast<float>(n + 3 * k - (n % 4 + 1)) * (0.5f + 0.25f * n)) << n << "," << k;
  }
}

// GPTQ 4-bit: K = 8 (one word per column), groups of 4 in act order g_idx, qzeros storing z - 1 (v1).
TEST(GptqConverter, ActOrderAndZeroOffByOne) {
  const int n_cols = 8, k_rows = 8;
  std::vector<uint32_t> qweight(n_cols, 0);
  for (int n = 0; n < n_cols; ++n)
    for (int k = 0; k < k_rows; ++k) qweight[n] |= static_cast<uint32_t>((n * k + 1) % 16) << (4 * k);
  // Stored zeros z - 1: group 0 holds 6 for every column, group 1 holds column index n (nibble n).
  const std::vector<uint32_t> qzeros = {0x66666666u, 0x76543210u};
  const std::vector<int32_t> g_idx = {1, 0, 1, 0, 0, 1, 1, 0};
  std::vector<float> scales(2 * n_cols);
  for (int i = 0; i < 2 * n_cols; ++i) scales[i] = 0.125f * (i + 1);
  SafetensorsWriter w;
  w.tensor("m.qweight", "I32", {1, n_cols}, to_bytes(qweight));
  w.tensor("m.qzeros", "I32", {2, 1}, to_bytes(qzeros));
  w.tensor("m.scales", "F16", {2, n_cols}, f16_bytes(scales));
  w.tensor("m.g_idx", "I32", {k_rows}, to_bytes(g_idx));
  for (bool v2 : {false, true}) {
    TinyCheckpoint t;
    QuantConfig config{.method = QuantMethod::kGptq, .name = "gptq", .bits = 4, .group_size = 4, .symmetric = false};
    config.gptq_v2 = v2;
    const Weight weight = t.load(w, config, n_cols, k_rows);
    ASSERT_EQ(weight.scheme, QuantScheme::kInt4Group);
    ASSERT_FALSE(weight.g_idx.empty());  // not k / group_size: kept
    const std::vector<float> v = dequantize_all(weight);
    for (int n = 0; n < n_cols; ++n)
      for (int k = 0; k < k_rows; ++k) {
        const int g = g_idx[k];
        const int z = (g == 0 ? 6 : n) + (v2 ? 0 : 1);
        EXPECT_EQ(v[n * k_rows + k], static_cast<float>((n * k + 1) % 16 - z) * scales[g * n_cols + n]) << n << "," << k;
      }
  }
}

// GPTQ 8-bit: four codes per word along K; zero points become signed (z - 128).
TEST(GptqConverter, EightBitPerChannel) {
  const int n_cols = 4, k_rows = 8;
  std::vector<uint32_t> qweight(2 * n_cols, 0);  // [K/4, N]
  for (int r = 0; r < 2; ++r)
    for (int n = 0; n < n_cols; ++n)
      for (int j = 0; j < 4; ++j) qweight[r * n_cols + n] |= static_cast<uint32_t>(100 + 10 * n + 4 * r + j) << (8 * j);
  SafetensorsWriter w;
  w.tensor("m.qweight", "I32", {2, n_cols}, to_bytes(qweight));
  w.tensor("m.qzeros", "I32", {1, 1}, to_bytes(std::vector<uint32_t>{0x7F7F7F7Fu}));  // z - 1 = 127: z = 128
  w.tensor("m.scales", "F32", {1, n_cols}, to_bytes(std::vector<float>{1.0f, 0.5f, 0.25f, 2.0f}));
  TinyCheckpoint t;
  const QuantConfig config{.method = QuantMethod::kGptq, .name = "gptq", .bits = 8, .group_size = 0};
  const Weight weight = t.load(w, config, n_cols, k_rows);
  ASSERT_EQ(weight.scheme, QuantScheme::kInt8Channel);
  EXPECT_TRUE(weight.zeros.empty());  // symmetric: all zero points 0 once signed
  const std::vector<float> v = dequantize_all(weight);
  const float s[] = {1.0f, 0.5f, 0.25f, 2.0f};
  for (int n = 0; n < n_cols; ++n)
    for (int k = 0; k < k_rows; ++k) EXPECT_EQ(v[n * k_rows + k], static_cast<float>(100 + 10 * n + k - 128) * s[n]);
}

// GPTQ 8-bit asymmetric, two groups of 4 along K: qzeros [G', N/4] pack four columns' zero points a word (v1 stores
// z - 1, gptq_v2 z itself), and each zero point survives the move to the signed domain (codes q - 128, zeros
// z - 128, so q - z is unchanged). The CPU kernel then gives the product with (q - z) * s computed here.
TEST(GptqConverter, EightBitAsymmetricGroups) {
  const int n_cols = 8, k_rows = 8, group = 4;
  auto q = [](int n, int k) { return (37 * n + 11 * k + 5) % 256; };
  auto stored_zero = [](int g, int n) { return 60 + 30 * g + 7 * n; };  // 60..151: never the symmetric 127
  std::vector<uint32_t> qweight(2 * n_cols, 0);  // [K/4, N]: code j of word (r, n) is k = 4r + j
  for (int r = 0; r < 2; ++r)
    for (int n = 0; n < n_cols; ++n)
      for (int j = 0; j < 4; ++j) qweight[r * n_cols + n] |= static_cast<uint32_t>(q(n, 4 * r + j)) << (8 * j);
  std::vector<uint32_t> qzeros(2 * 2, 0);  // [2 groups, N/4]: code j of word (g, c) is column 4c + j
  for (int g = 0; g < 2; ++g)
    for (int n = 0; n < n_cols; ++n) qzeros[g * 2 + n / 4] |= static_cast<uint32_t>(stored_zero(g, n)) << (8 * (n % 4));
  std::vector<float> scales(2 * n_cols);  // [2, N], exact in F16
  for (int i = 0; i < 2 * n_cols; ++i) scales[i] = 0.0625f * (i + 1);
  SafetensorsWriter w;
  w.tensor("m.qweight", "I32", {2, n_cols}, to_bytes(qweight));
  w.tensor("m.qzeros", "I32", {2, 2}, to_bytes(qzeros));
  w.tensor("m.scales", "F16", {2, n_cols}, f16_bytes(scales));
  std::vector<int32_t> g_idx(k_rows);  // k / group_size: dropped as carrying nothing
  for (int k = 0; k < k_rows; ++k) g_idx[k] = k / group;
  w.tensor("m.g_idx", "I32", {k_rows}, to_bytes(g_idx));

  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uni(-1, 1);
  const int tokens = 3;
  std::vector<float> x(static_cast<size_t>(tokens * k_rows));
  for (float& v : x) v = uni(rng);
  for (bool v2 : {false, true}) {
    TinyCheckpoint t;
    QuantConfig config{.method = QuantMethod::kGptq, .name = "gptq", .bits = 8, .group_size = group, .symmetric = false};
    config.gptq_v2 = v2;
    const Weight weight = t.load(w, config, n_cols, k_rows);
    ASSERT_EQ(weight.scheme, QuantScheme::kInt8Channel);
    EXPECT_EQ(weight.group_size, group);
    ASSERT_FALSE(weight.zeros.empty());  // asymmetric: the zero points are kept
    EXPECT_EQ(weight.zeros.shape_string(), "[8, 2]");
    EXPECT_TRUE(weight.g_idx.empty());
    EXPECT_EQ(weight.source_format, v2 ? "gptq v2 8-bit asym g4" : "gptq v1 8-bit asym g4");
    const std::vector<float> v = dequantize_all(weight);
    std::vector<double> expected(static_cast<size_t>(n_cols * k_rows));
    for (int n = 0; n < n_cols; ++n)
      for (int k = 0; k < k_rows; ++k) {
        const int g = k / group, z = stored_zero(g, n) + (v2 ? 0 : 1);
        expected[n * k_rows + k] = static_cast<double>(q(n, k) - z) * scales[g * n_cols + n];
        EXPECT_EQ(v[n * k_rows + k], static_cast<float>(expected[n * k_rows + k])) << (v2 ? "v2 " : "v1 ") << n << "," << k;
      }
    std::vector<float> out(static_cast<size_t>(tokens * n_cols));
    cpu::linear_quant_f32(out.data(), x.data(), tokens, weight);
    for (int tok = 0; tok < tokens; ++tok)
      for (int n = 0; n < n_cols; ++n) {
        double ref = 0;
        for (int k = 0; k < k_rows; ++k) ref += expected[n * k_rows + k] * x[tok * k_rows + k];
        EXPECT_NEAR(out[tok * n_cols + n], ref, 1e-5 * (1 + std::abs(ref))) << (v2 ? "v2 " : "v1 ") << tok << "," << n;
      }
  }
}

// compressed-tensors pack-quantized: row-major bit streams, codes stored q + 2^(b-1).
TEST(CompressedTensorsConverter, PackQuantizedFourAndEightBits) {
  for (int bits : {4, 8}) {
    const int n_rows = 2, k_cols = 8, per_word = 32 / bits;
    std::vector<uint32_t> packed(static_cast<size_t>(n_rows * k_cols / per_word), 0);
    auto q = [&](int n, int k) { return bits == 4 ? (n * 5 + k) % 16 - 8 : (n * 37 + k * 11) % 256 - 128; };
    for (int n = 0; n < n_rows; ++n)
      for (int k = 0; k < k_cols; ++k)
        packed[(n * k_cols + k) / per_word] |= static_cast<uint32_t>(q(n, k) + (1 << (bits - 1)))
                                               << (bits * ((n * k_cols + k) % per_word));
    SafetensorsWriter w;
    w.tensor("m.weight_packed", "I32", {n_rows, k_cols * bits / 32}, to_bytes(packed));
    w.tensor("m.weight_scale", "F32", {n_rows, 1}, to_bytes(std::vector<float>{0.1f, 3.0f}));
    w.tensor("m.weight_shape", "I64", {2}, to_bytes(std::vector<int64_t>{n_rows, k_cols}));
    TinyCheckpoint t;
    const QuantConfig config{.method = QuantMethod::kCompressedTensors, .name = "compressed-tensors", .bits = bits};
    const Weight weight = t.load(w, config, n_rows, k_cols);
    EXPECT_EQ(weight.scheme, bits == 4 ? QuantScheme::kInt4Group : QuantScheme::kInt8Channel);
    const std::vector<float> v = dequantize_all(weight);
    for (int n = 0; n < n_rows; ++n)
      for (int k = 0; k < k_cols; ++k)
        EXPECT_EQ(v[n * k_cols + k], static_cast<float>(q(n, k)) * (n == 0 ? 0.1f : 3.0f)) << bits << " bits";
  }
}

TEST(CompressedTensorsConverter, Fp8PerChannelAndPerTensorScales) {
  const std::vector<uint8_t> codes = {0x38, 0xB8, 0x7E, 0x01, 0x40, 0x30, 0xFE, 0x00};  // 1, -1, 448, 2^-9, 2, .5
  for (bool per_tensor : {false, true}) {
    SafetensorsWriter w;
    w.tensor("m.weight", "F8_E4M3", {2, 4}, codes);
    if (per_tensor)
      w.tensor("m.weight_scale", "F32", {1}, to_bytes(std::vector<float>{0.5f}));
    else
      w.tensor("m.weight_scale", "F32", {2, 1}, to_bytes(std::vector<float>{0.5f, 4.0f}));
    w.tensor("m.input_scale", "F32", {1}, to_bytes(std::vector<float>{1.0f}));  // ignored: weight-only compute
    TinyCheckpoint t;
    const QuantConfig config{
        .method = QuantMethod::kCompressedTensors, .name = "compressed-tensors", .bits = 8, .is_float = true};
    const Weight weight = t.load(w, config, 2, 4);
    ASSERT_EQ(weight.scheme, QuantScheme::kFp8Channel);
    const std::vector<float> v = dequantize_all(weight);
    const float s1 = per_tensor ? 0.5f : 4.0f;
    EXPECT_EQ(v, (std::vector<float>{0.5f, -0.5f, 224.0f, 0.5f * std::ldexp(1.0f, -9), 2.0f * s1, 0.5f * s1,
                                     -448.0f * s1, 0.0f}));
  }
}

// ModelOpt FP8 writes a 0-dimensional weight_scale; fp8 with weight_block_size [bn, bk] one weight_scale_inv
// per block, which becomes a per-row, per-group scale.
TEST(Fp8Converter, ScalarScalesAndBlockScales) {
  const std::vector<uint8_t> codes = {0x38, 0xB8, 0x40, 0x30, 0x38, 0x38, 0x38, 0x38, 0x40, 0x40, 0x40, 0x40};  // [3, 4]
  {
    SafetensorsWriter w;
    w.tensor("m.weight", "F8_E4M3", {3, 4}, codes);
    w.tensor("m.weight_scale", "F32", {}, to_bytes(std::vector<float>{0.25f}));
    TinyCheckpoint t;
    const Weight weight = t.load(w, QuantConfig{.method = QuantMethod::kModelOpt, .name = "modelopt", .bits = 8,
                                                .is_float = true}, 3, 4);
    const std::vector<float> v = dequantize_all(weight);
    EXPECT_EQ(v, (std::vector<float>{0.25f, -0.25f, 0.5f, 0.125f, 0.25f, 0.25f, 0.25f, 0.25f, 0.5f, 0.5f, 0.5f, 0.5f}));
  }
  {  // blocks of 2 rows x 2 columns: rows 0-1 use block row 0, row 2 block row 1; columns 0-1 group 0, 2-3 group 1
    SafetensorsWriter w;
    w.tensor("m.weight", "F8_E4M3", {3, 4}, codes);
    w.tensor("m.weight_scale_inv", "F32", {2, 2}, to_bytes(std::vector<float>{1.0f, 2.0f, 4.0f, 8.0f}));
    TinyCheckpoint t;
    const Weight weight = t.load(w, QuantConfig{.method = QuantMethod::kFp8, .name = "fp8", .bits = 8, .is_float = true,
                                                .fp8_block_n = 2, .fp8_block_k = 2}, 3, 4);
    EXPECT_EQ(weight.group_size, 2);
    const std::vector<float> v = dequantize_all(weight);
    EXPECT_EQ(v, (std::vector<float>{1.0f, -1.0f, 4.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 8.0f, 8.0f, 16.0f, 16.0f}));
  }
}

TEST(Fp8E4M3, DecodesEveryClassOfCode) {
  EXPECT_EQ(f8e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x7E), 448.0f);  // largest finite
  EXPECT_EQ(f8e4m3_to_f32(0xFE), -448.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(f8e4m3_to_f32(0x07), 7 * std::ldexp(1.0f, -9));  // largest subnormal
  EXPECT_TRUE(std::isnan(f8e4m3_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(f8e4m3_to_f32(0xFF)));
  for (int v = 0; v < 0x7E; ++v) EXPECT_LT(f8e4m3_to_f32(static_cast<uint8_t>(v)), f8e4m3_to_f32(static_cast<uint8_t>(v + 1)));
}

// The CPU kernel equals a double-precision product of the dequantized rows, and is batch-invariant.
TEST(CpuLinearQuant, MatchesDequantizedProductForEveryScheme) {
  const int64_t n = 37, k = 64, tokens = 6;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-1, 1);
  std::vector<float> x(static_cast<size_t>(tokens * k));
  for (float& v : x) v = uni(rng);
  // An int4 weight with act-order g_idx, and int8 / fp8 weights, built directly in the internal form.
  HostTensor i4(DType::kU8, {n, k / 2}), i4s(DType::kF32, {n, 2}), i4z(DType::kU8, {n, 2}), gidx(DType::kI32, {k});
  HostTensor i8(DType::kI8, {n, k}), i8s(DType::kF32, {n, 1}), f8(DType::kF8E4M3, {n, k}), f8s(DType::kF32, {n, 1});
  for (int64_t i = 0; i < n * k / 2; ++i) i4.ptr<uint8_t>()[i] = static_cast<uint8_t>(rng());
  for (int64_t i = 0; i < n * 2; ++i) i4s.ptr<float>()[i] = 0.01f * (1 + i % 7), i4z.ptr<uint8_t>()[i] = rng() % 16;
  for (int64_t i = 0; i < k; ++i) gidx.ptr<int32_t>()[i] = static_cast<int32_t>((i * 7) % 2);
  for (int64_t i = 0; i < n * k; ++i) i8.ptr<int8_t>()[i] = static_cast<int8_t>(rng()), f8.ptr<uint8_t>()[i] = rng() % 0x7E;
  for (int64_t i = 0; i < n; ++i) i8s.ptr<float>()[i] = 0.003f * (1 + i % 5), f8s.ptr<float>()[i] = 0.02f;
  const Weight weights[] = {
      {.data = i4.view(), .scheme = QuantScheme::kInt4Group, .scales = i4s.view(), .zeros = i4z.view(),
       .g_idx = gidx.view(), .group_size = 32, .in_features = k},
      {.data = i8.view(), .scheme = QuantScheme::kInt8Channel, .scales = i8s.view(), .group_size = k, .in_features = k},
      {.data = f8.view(), .scheme = QuantScheme::kFp8Channel, .scales = f8s.view(), .group_size = k, .in_features = k}};
  for (const Weight& w : weights) {
    const std::vector<float> deq = dequantize_all(w);
    std::vector<float> out(static_cast<size_t>(tokens * n));
    cpu::linear_quant_f32(out.data(), x.data(), tokens, w);
    for (int64_t t = 0; t < tokens; ++t) {
      std::vector<float> one(static_cast<size_t>(n));
      cpu::linear_quant_f32(one.data(), x.data() + t * k, 1, w);
      for (int64_t r = 0; r < n; ++r) {
        double ref = 0;
        for (int64_t c = 0; c < k; ++c) ref += static_cast<double>(deq[r * k + c]) * x[t * k + c];
        EXPECT_NEAR(out[t * n + r], ref, 1e-5 * (1 + std::abs(ref))) << quant_scheme_name(w.scheme);
        EXPECT_EQ(out[t * n + r], one[r]) << "batch-invariant";
      }
    }
  }
}

}  // namespace
}  // namespace pagoda
