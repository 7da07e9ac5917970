// The FP8 KV cache on the CPU reference (kv/kv_fp8.h): the row format against its definition (the smallest
// power-of-two scale that holds the row, values within half an e4m3 step, the scaling exact), and paged
// attention over an FP8 cache equal, bit for bit, to the fp32 attention over the values the cache holds, and
// within a bounded error of the fp32 attention over the values that were stored. Also the fp16 cache's storage
// (--kv-cache-dtype fp16: each value rounded to fp16).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "pagoda/backend/cpu/cpu_ops.h"
#include "pagoda/core/dtype.h"
#include "pagoda/kv/kv_fp8.h"
#include "pagoda/runner/batch_builder.h"

namespace pagoda {
namespace {

std::vector<float> random_values(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(Fp8KvRow, TheScaleIsTheSmallestPowerOfTwoThatHoldsTheRow) {
  for (const float amax : {1.0f, 448.0f, 449.0f, 896.0f, 3.5f, 1e-3f, 7e5f, 1e-30f}) {
    const int e = fp8_kv_exponent(amax);
    EXPECT_GE(std::ldexp(448.0, e), amax) << amax;
    EXPECT_LT(std::ldexp(448.0, e - 1), amax) << amax;
  }
  EXPECT_EQ(fp8_kv_exponent(448.0f), 0);
  EXPECT_EQ(fp8_kv_exponent(896.0f), 1);
  EXPECT_EQ(fp8_kv_exponent(0.0f), kFp8KvZeroExponent);
  EXPECT_EQ(fp8_kv_exponent(1e30f), kFp8KvMaxExponent);  // beyond 448 * 2^63 a row saturates
  EXPECT_EQ(fp8_kv_exponent(1e-40f), -126);

  for (const float stddev : {1e-3f, 1.0f, 300.0f}) {
    const int n = 128;
    std::vector<float> x = random_values(n, 7, stddev), back(n);
    std::vector<uint8_t> codes(n);
    const int8_t e = quantize_fp8_kv_row(x.data(), n, codes.data());
    dequantize_fp8_kv_row(codes.data(), e, n, back.data());
    float amax = 0.0f;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    EXPECT_EQ(e, fp8_kv_exponent(amax));
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(back[i], std::ldexp(f8e4m3_to_f32(codes[i]), e)) << "the scaling is exact";
      EXPECT_EQ(codes[i], f32_to_e4m3_saturating(std::ldexp(x[i], -e))) << "the nearest code";
      // Half a step of 3 mantissa bits, or of e4m3's subnormal spacing 2^-9 at the scale.
      EXPECT_LE(std::fabs(back[i] - x[i]), std::max(std::fabs(x[i]) / 16.0f, std::ldexp(1.0f, e - 10)) * 1.0001f);
    }
  }
  std::vector<float> zeros(16, 0.0f), back(16, 1.0f);
  std::vector<uint8_t> codes(16, 0xff);
  dequantize_fp8_kv_row(codes.data(), quantize_fp8_kv_row(zeros.data(), 16, codes.data()), 16, back.data());
  EXPECT_EQ(back, zeros);
}

struct Setup {
  static constexpr int64_t nh = 8, nkv = 2, hd = 64;
  static constexpr int block_size = 4;
};

// Attention over a cache of `dtype` after storing k and v for two sequences (7 and 3 tokens, shuffled
// blocks); returns the outputs, and the cache's values read back as fp32 into `held` ([slots, nkv, hd] for K
// then V).
std::vector<float> attention_after_store(DType dtype, const std::vector<float>& q, const std::vector<float>& k,
                                         const std::vector<float>& v, std::vector<float>* held = nullptr,
                                         int64_t fp8_scratch_bytes = int64_t{64} << 20) {
  const std::vector<TokenId> a = {1, 2, 3, 4, 5, 6, 7}, b = {8, 9, 10};
  const std::vector<int32_t> table_a = {3, 0}, table_b = {2};
  const SequenceChunk chunks[] = {{a, 0, table_a, LogitsWanted::kLast}, {b, 0, table_b, LogitsWanted::kLast}};
  BatchBuilder builder;
  const ForwardBatch& batch = builder.build(chunks, Setup::block_size);
  const int64_t T = batch.num_tokens;
  const KvCacheSpec spec{.num_layers = 1, .num_blocks = 4, .block_size = Setup::block_size,
                         .num_kv_heads = Setup::nkv, .head_dim = Setup::hd, .dtype = dtype};
  CpuOps ops(CpuOpsOptions{.fp8_kv_scratch_bytes = fp8_scratch_bytes});
  KvCache cache = ops.allocate_kv_cache(spec);
  std::vector<float> kk = k, vv = v, qq = q;
  ops.store_kv(cache, 0, Tensor(kk.data(), DType::kF32, {T, Setup::nkv, Setup::hd}),
               Tensor(vv.data(), DType::kF32, {T, Setup::nkv, Setup::hd}), batch);
  Tensor out = ops.alloc(DType::kF32, {T, Setup::nh, Setup::hd});
  ops.attention(out, Tensor(qq.data(), DType::kF32, {T, Setup::nh, Setup::hd}), cache, 0, batch, 0.125f);
  if (held != nullptr) {
    const int64_t rows = spec.num_tokens() * Setup::nkv;
    held->assign(static_cast<size_t>(2 * rows * Setup::hd), 0.0f);
    for (int64_t r = 0; r < rows; ++r)
      for (int kv = 0; kv < 2; ++kv) {
        float* dst = held->data() + (kv * rows + r) * Setup::hd;
        if (spec.fp8()) {
          const KvCache& c = cache;
          const std::vector<Tensor>& codes = kv == 0 ? c.k : c.v;
          const std::vector<Tensor>& exps = kv == 0 ? c.k_exp : c.v_exp;
          dequantize_fp8_kv_row(codes[0].ptr<uint8_t>() + r * Setup::hd,
                                exps[0].ptr<int8_t>()[spec.exponent_index(r / Setup::nkv, static_cast<int>(r % Setup::nkv))],
                                Setup::hd, dst);
        } else if (spec.dtype == DType::kF16) {
          const uint16_t* src = (kv == 0 ? cache.k : cache.v)[0].ptr<uint16_t>() + r * Setup::hd;
          for (int64_t i = 0; i < Setup::hd; ++i) dst[i] = f16_to_f32(src[i]);
        } else {
          std::copy_n((kv == 0 ? cache.k : cache.v)[0].ptr<float>() + r * Setup::hd, Setup::hd, dst);
        }
      }
  }
  std::vector<float> result(out.ptr<float>(), out.ptr<float>() + out.numel());
  ops.free_kv_cache(cache);
  return result;
}

// `got` differs from the fp32 cache's `exact` (the cache rounds), by less than `bound` of exact's largest value.
void expect_close_not_equal(const char* name, const std::vector<float>& got, const std::vector<float>& exact,
                            double bound) {
  ASSERT_EQ(got.size(), exact.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(got[i] - exact[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(exact[i])));
  }
  std::printf("[ measured ] %s KV attention against fp32 KV: max |diff| %.4g of max |out| %.4g\n", name, worst, scale);
  EXPECT_GT(worst, 0.0);
  EXPECT_LT(worst, bound * scale);
}

TEST(Fp8KvCache, AttentionIsTheFp32AttentionOverTheValuesTheCacheHolds) {
  const int64_t T = 10;
  const std::vector<float> q = random_values(T * Setup::nh * Setup::hd, 1), k = random_values(T * Setup::nkv * Setup::hd, 2, 1.0f),
                           v = random_values(T * Setup::nkv * Setup::hd, 3, 0.5f);
  std::vector<float> held;
  const std::vector<float> fp8 = attention_after_store(DType::kF8E4M3, q, k, v, &held);
  // An fp32 cache given exactly those values: the same keys and values, token by token.
  const int64_t rows = 4 * Setup::block_size * Setup::nkv;
  const std::vector<TokenId> a = {1, 2, 3, 4, 5, 6, 7}, b = {8, 9, 10};
  const std::vector<int32_t> table_a = {3, 0}, table_b = {2};
  const SequenceChunk chunks[] = {{a, 0, table_a, LogitsWanted::kLast}, {b, 0, table_b, LogitsWanted::kLast}};
  BatchBuilder builder;
  const ForwardBatch& batch = builder.build(chunks, Setup::block_size);
  std::vector<float> k_held(static_cast<size_t>(T * Setup::nkv * Setup::hd)), v_held(k_held.size());
  for (int64_t t = 0; t < T; ++t) {
    const int64_t slot = batch.slot_mapping.ptr<int32_t>()[t];
    for (int64_t h = 0; h < Setup::nkv; ++h) {
      std::copy_n(held.data() + (slot * Setup::nkv + h) * Setup::hd, Setup::hd, k_held.data() + (t * Setup::nkv + h) * Setup::hd);
      std::copy_n(held.data() + (rows + slot * Setup::nkv + h) * Setup::hd, Setup::hd,
                  v_held.data() + (t * Setup::nkv + h) * Setup::hd);
    }
  }
  EXPECT_EQ(fp8, attention_after_store(DType::kF32, q, k_held, v_held));
  // A scratch of one page: each sequence's pages dequantized on their own, the same outputs.
  EXPECT_EQ(fp8, attention_after_store(DType::kF8E4M3, q, k, v, nullptr, 1));

  // Against the values that were stored: e4m3 keeps 3 mantissa bits (2^-4 relative a value at most).
  const std::vector<float> exact = attention_after_store(DType::kF32, q, k, v);
  expect_close_not_equal("FP8", fp8, exact, 0.06);
}

// --kv-cache-dtype fp16: store_kv keeps each value rounded to fp16 (to nearest even: ties, subnormals and the
// overflow to infinity as core/dtype.h's conversion rounds them), and attention over the cache stays within fp16's
// rounding of the fp32 cache's.
TEST(Fp16KvCache, HoldsEachValueRoundedToFp16) {
  const int64_t T = 10;
  const std::vector<float> q = random_values(T * Setup::nh * Setup::hd, 1);
  std::vector<float> k = random_values(T * Setup::nkv * Setup::hd, 2), v = random_values(T * Setup::nkv * Setup::hd, 3, 0.5f);
  const float specials[] = {65504.0f, 65520.0f, 1e-8f, 1.0f + 0x1p-11f, 1.0f + 0x3p-11f, -0.0f, -2.5e-6f};
  std::copy(std::begin(specials), std::end(specials), k.begin() + 5);
  std::vector<float> held;
  const std::vector<float> f16 = attention_after_store(DType::kF16, q, k, v, &held);
  const std::vector<TokenId> a = {1, 2, 3, 4, 5, 6, 7}, b = {8, 9, 10};
  const std::vector<int32_t> table_a = {3, 0}, table_b = {2};
  const SequenceChunk chunks[] = {{a, 0, table_a, LogitsWanted::kLast}, {b, 0, table_b, LogitsWanted::kLast}};
  BatchBuilder builder;
  const ForwardBatch& batch = builder.build(chunks, Setup::block_size);
  const int64_t rows = 4 * Setup::block_size * Setup::nkv, row = Setup::nkv * Setup::hd;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t slot = batch.slot_mapping.ptr<int32_t>()[t];
    for (int64_t i = 0; i < row; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(held[slot * row + i]), std::bit_cast<uint32_t>(f16_to_f32(f32_to_f16(k[t * row + i]))))
          << "K of token " << t << " value " << i << " (" << k[t * row + i] << ")";
      ASSERT_EQ(held[rows * Setup::hd + slot * row + i], f16_to_f32(f32_to_f16(v[t * row + i]))) << "V of token " << t;
    }
  }
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(65520.0f))));  // the specials cover the overflow
  // Against the fp32 cache, with ordinary keys (a key of 65504 would make the fp32 scores differ by its rounding).
  std::vector<float> k_plain = random_values(T * Setup::nkv * Setup::hd, 2);
  const std::vector<float> a16 = attention_after_store(DType::kF16, q, k_plain, v),
                           a32 = attention_after_store(DType::kF32, q, k_plain, v);
  expect_close_not_equal("fp16", a16, a32, 4e-3);
  EXPECT_EQ(f16.size(), a32.size());
}

TEST(Fp8KvCache, HoldsNearlyFourTimesTheFp32TokensPerByte) {
  const KvCacheSpec f32{.num_layers = 32, .num_blocks = 1, .block_size = 16, .num_kv_heads = 8, .head_dim = 128,
                        .dtype = DType::kF32};
  KvCacheSpec fp8 = f32, bf16 = f32;
  fp8.dtype = DType::kF8E4M3;
  bf16.dtype = DType::kBF16;
  EXPECT_EQ(fp8.bytes_per_block(), 2LL * 32 * 16 * 8 * (128 + 1));  // codes and one exponent a row
  EXPECT_NEAR(static_cast<double>(bf16.bytes_per_block()) / fp8.bytes_per_block(), 1.984, 1e-3);
  EXPECT_NEAR(static_cast<double>(f32.bytes_per_block()) / fp8.bytes_per_block(), 3.969, 1e-3);
}


// --calculate-kv-scales (Fp8KvScales::kPerLayer): the first batch a layer stores sets its K and V exponents
// from the batch's amax; every row of later batches uses them, saturating beyond 448 * 2^e, and carries them
// as its own exponent, so attention reads the cache as usual. Forgetting the calibration recalibrates.
TEST(Fp8KvCache, PerLayerScalesComeFromTheFirstBatchAndLaterRowsSaturate) {
  const KvCacheSpec spec{.num_layers = 2, .num_blocks = 4, .block_size = Setup::block_size, .num_kv_heads = Setup::nkv,
                         .head_dim = Setup::hd, .dtype = DType::kF8E4M3, .fp8_scales = Fp8KvScales::kPerLayer};
  CpuOps ops;
  KvCache cache = ops.allocate_kv_cache(spec);
  BatchBuilder builder;
  const std::vector<TokenId> first = {1, 2, 3, 4, 5}, second = {6, 7, 8};
  const std::vector<int32_t> table_first = {1, 3}, table_second = {2};
  const int64_t row = Setup::nkv * Setup::hd;
  const auto store = [&](const std::vector<TokenId>& ids, const std::vector<int32_t>& table, int layer, float stddev,
                         uint32_t seed) {
    const SequenceChunk chunk{ids, 0, table, LogitsWanted::kLast};
    const ForwardBatch& batch = builder.build(std::span(&chunk, 1), Setup::block_size);
    const int64_t T = batch.num_tokens;
    std::vector<float> k = random_values(T * row, seed, stddev), v = random_values(T * row, seed + 1, stddev / 4);
    ops.store_kv(cache, layer, Tensor(k.data(), DType::kF32, {T, Setup::nkv, Setup::hd}),
                 Tensor(v.data(), DType::kF32, {T, Setup::nkv, Setup::hd}), batch);
    // Every row's codes are the values at the layer's exponents, which it carries.
    for (int64_t t = 0; t < T; ++t) {
      const int32_t slot = batch.slot_mapping.ptr<int32_t>()[t];
      for (int h = 0; h < Setup::nkv; ++h) {
        const int64_t r = static_cast<int64_t>(slot) * Setup::nkv + h;
        std::vector<uint8_t> want(Setup::hd);
        quantize_fp8_kv_row_at(k.data() + t * row + h * Setup::hd, Setup::hd, cache.k_layer_exp[layer], want.data());
        EXPECT_TRUE(std::equal(want.begin(), want.end(), cache.k[layer].ptr<uint8_t>() + r * Setup::hd));
        quantize_fp8_kv_row_at(v.data() + t * row + h * Setup::hd, Setup::hd, cache.v_layer_exp[layer], want.data());
        EXPECT_TRUE(std::equal(want.begin(), want.end(), cache.v[layer].ptr<uint8_t>() + r * Setup::hd));
        EXPECT_EQ(cache.k_exp[layer].ptr<int8_t>()[spec.exponent_index(slot, h)], cache.k_layer_exp[layer]);
        EXPECT_EQ(cache.v_exp[layer].ptr<int8_t>()[spec.exponent_index(slot, h)], cache.v_layer_exp[layer]);
      }
    }
    float k_amax = 0.0f, v_amax = 0.0f;
    for (float x : k) k_amax = std::max(k_amax, std::fabs(x));
    for (float x : v) v_amax = std::max(v_amax, std::fabs(x));
    return std::pair{k_amax, v_amax};
  };
  const auto [k_amax, v_amax] = store(first, table_first, 0, 1.0f, 10);
  ASSERT_EQ(cache.k_layer_exp.size(), 2u);
  EXPECT_EQ(cache.k_layer_exp[0], fp8_kv_exponent(k_amax));
  EXPECT_EQ(cache.v_layer_exp[0], fp8_kv_exponent(v_amax));
  EXPECT_EQ(cache.k_layer_exp[1], kFp8KvUncalibrated);  // layer 1 has stored nothing yet
  const int8_t k_e = cache.k_layer_exp[0];
  // A later batch 1000x larger: the exponent stays, its rows saturate at 448 * 2^e.
  store(second, table_second, 0, 1000.0f, 20);
  EXPECT_EQ(cache.k_layer_exp[0], k_e);
  const uint8_t* codes = cache.k[0].ptr<uint8_t>() + int64_t{2} * Setup::block_size * row;  // block 2
  EXPECT_TRUE(std::any_of(codes, codes + 3 * row, [](uint8_t c) { return (c & 0x7f) == 0x7e; }))
      << "some value saturated at 448";
  // Layer 1 calibrates on its own first batch.
  store(second, table_second, 1, 1000.0f, 30);
  EXPECT_GT(cache.k_layer_exp[1], k_e);
  // Forgotten (as after the start-up forward): the next batch calibrates again.
  cache.k_layer_exp.clear();
  cache.v_layer_exp.clear();
  store(second, table_second, 0, 1000.0f, 40);
  EXPECT_GT(cache.k_layer_exp[0], k_e);
  ops.free_kv_cache(cache);
}

}  // namespace
}  // namespace pagoda
