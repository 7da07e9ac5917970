// CPU kernels against naive double-precision references: linear for every weight dtype and awkward
// shapes, paged attention with scattered blocks and several sequences, RMSNorm and RoPE.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "pagoda/backend/cpu/cpu_isa.h"
#include "pagoda/backend/cpu/cpu_kernels.h"
#include "pagoda/core/dtype.h"
#include "pagoda/runner/batch_builder.h"

namespace pagoda {
namespace {

std::vector<float> random_vector(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Encodes rows of fp32 values into `dtype` storage; returns bytes and the values the storage really holds.
std::vector<uint8_t> encode_rows(const std::vector<float>& w, int64_t n, int64_t k, DType dtype,
                                 std::vector<float>& exact) {
  const int64_t row_bytes = dtype_storage_bytes(dtype, k);
  std::vector<uint8_t> out(static_cast<size_t>(n * row_bytes));
  exact.resize(w.size());
  for (int64_t r = 0; r < n; ++r) {
    uint8_t* row = out.data() + r * row_bytes;
    const float* src = w.data() + r * k;
    float* ex = exact.data() + r * k;
    for (int64_t i = 0; i < k; ++i) {
      if (dtype == DType::kF32) {
        std::memcpy(row + 4 * i, &src[i], 4);
        ex[i] = src[i];
      } else if (dtype == DType::kBF16 || dtype == DType::kF16) {
        const uint16_t h = dtype == DType::kBF16 ? f32_to_bf16(src[i]) : f32_to_f16(src[i]);
        std::memcpy(row + 2 * i, &h, 2);
        ex[i] = dtype == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
      }
    }
  }
  return out;
}

// Every instruction-set level this CPU has (AVX2 always; AVX-512 where present), each in turn; the best
// level is active again when the scope ends.
std::vector<cpu::Isa> isas_of_this_cpu() {
  std::vector<cpu::Isa> isas = {cpu::Isa::kAvx2};
  if (cpu::cpu_features().avx512) isas.push_back(cpu::Isa::kAvx512);
  return isas;
}
struct RestoreIsa {
  cpu::Isa saved = cpu::active_isa();
  ~RestoreIsa() { cpu::set_active_isa(saved); }
};

using LinearShape = std::tuple<DType, int64_t, int64_t, int64_t>;
class LinearTest : public ::testing::TestWithParam<std::tuple<LinearShape, cpu::Isa>> {};

TEST_P(LinearTest, MatchesNaiveProduct) {
  const auto [shape, isa] = GetParam();
  const auto [dtype, num_tokens, n, k] = shape;
  RestoreIsa restore;
  if (cpu::set_active_isa(isa) != isa) GTEST_SKIP() << "this CPU has no " << cpu::isa_name(isa);
  std::mt19937 rng(42);
  const std::vector<float> x = random_vector(static_cast<size_t>(num_tokens * k), rng);
  std::vector<float> exact;
  const std::vector<uint8_t> w = encode_rows(random_vector(static_cast<size_t>(n * k), rng, 0.1f), n, k, dtype, exact);
  std::vector<float> out(static_cast<size_t>(num_tokens * n), NAN);
  cpu::linear_f32(out.data(), x.data(), num_tokens, w.data(), dtype, n, k);
  const std::vector<float>& xr = x;
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t r = 0; r < n; ++r) {
      double ref = 0;
      double mag = 0;
      for (int64_t i = 0; i < k; ++i) {
        ref += static_cast<double>(xr[t * k + i]) * exact[r * k + i];
        mag += std::fabs(static_cast<double>(xr[t * k + i]) * exact[r * k + i]);
      }
      ASSERT_NEAR(out[t * n + r], ref, 1e-5 * mag + 1e-6) << "token " << t << " row " << r;
    }
  }
}

// A product must not depend on how many tokens share the call (batch invariance): the prefill path (many
// tokens) and the decode path (1-4 tokens) give the same bits, at each instruction-set level. k = 1000
// leaves a tail of 8 past the last 16 (and of 0 past the last 8) for the fp32-accumulating dtypes.
class LinearBatchInvariance : public ::testing::TestWithParam<DType> {};

TEST_P(LinearBatchInvariance, SameResultForEveryBatchSize) {
  const DType dtype = GetParam();
  const int64_t n = 37, num_tokens = 61;
  const int64_t k = 1000;
  std::mt19937 rng(5);
  const std::vector<float> x = random_vector(static_cast<size_t>(num_tokens * k), rng);
  std::vector<float> exact;
  const std::vector<uint8_t> w = encode_rows(random_vector(static_cast<size_t>(n * k), rng, 0.1f), n, k, dtype, exact);
  RestoreIsa restore;
  for (cpu::Isa isa : isas_of_this_cpu()) {
    cpu::set_active_isa(isa);
    std::vector<float> all(static_cast<size_t>(num_tokens * n));
    cpu::linear_f32(all.data(), x.data(), num_tokens, w.data(), dtype, n, k);
    for (int64_t group : {1, 2, 3, 4, 7}) {
      for (int64_t t0 = 0; t0 + group <= num_tokens; t0 += group) {
        std::vector<float> part(static_cast<size_t>(group * n));
        cpu::linear_f32(part.data(), x.data() + t0 * k, group, w.data(), dtype, n, k);
        for (int64_t t = 0; t < group; ++t)
          for (int64_t r = 0; r < n; ++r)
            ASSERT_EQ(part[t * n + r], all[(t0 + t) * n + r])
                << cpu::isa_name(isa) << " group " << group << " token " << t0 + t << " row " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LinearBatchInvariance,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

INSTANTIATE_TEST_SUITE_P(
    Shapes, LinearTest,
    ::testing::Combine(::testing::Values(std::make_tuple(DType::kF32, 1, 64, 64), std::make_tuple(DType::kF32, 7, 33, 172),
                      std::make_tuple(DType::kF32, 37, 130, 96), std::make_tuple(DType::kBF16, 1, 17, 64),
                      std::make_tuple(DType::kBF16, 9, 300, 256), std::make_tuple(DType::kF16, 5, 64, 172),
                      std::make_tuple(DType::kF16, 64, 48, 520), std::make_tuple(DType::kF32, 3, 1000, 2048),
                      // decode sizes (1-4 tokens) take the convert-in-register path; odd rows and k tails
                      std::make_tuple(DType::kF16, 2, 33, 172), std::make_tuple(DType::kF16, 3, 7, 2056),
                      std::make_tuple(DType::kBF16, 4, 9, 100), std::make_tuple(DType::kF32, 2, 7, 13),
                      std::make_tuple(DType::kF16, 1, 5632, 2048), std::make_tuple(DType::kBF16, 200, 70, 2064)),
    ::testing::Values(cpu::Isa::kAvx2, cpu::Isa::kAvx512)));

// Dense causal attention over explicit K/V per sequence, in double. Over an fp16 cache (llama.cpp's default) the
// products' inputs are fp16 values: the keys and values as stored, the queries and the probabilities rounded to
// fp16 (the reference rounds its double probabilities, which the kernel's fp32 ones round to alike unless one sits
// within ~1e-7 of a rounding boundary; none does with this seed).
class PagedAttention : public ::testing::TestWithParam<DType> {};

TEST_P(PagedAttention, MatchesDenseReferenceWithScatteredBlocks) {
  constexpr int kHeads = 4, kKvHeads = 2, kHeadDim = 8, kBlock = 4, kBlocks = 32;
  const bool f16 = GetParam() == DType::kF16;
  auto input = [&](double x) { return f16 ? static_cast<double>(f16_to_f32(f32_to_f16(static_cast<float>(x)))) : x; };
  std::mt19937 rng(7);
  KvCacheSpec spec{.num_layers = 1, .num_blocks = kBlocks, .block_size = kBlock, .num_kv_heads = kKvHeads,
                   .head_dim = kHeadDim, .dtype = GetParam()};
  const int64_t row = kKvHeads * kHeadDim;
  std::vector<float> k_cache(static_cast<size_t>(kBlocks * kBlock * row), NAN);
  std::vector<float> v_cache = k_cache;
  std::vector<uint16_t> k_cache16(k_cache.size(), 0x7e00), v_cache16(k_cache.size(), 0x7e00);  // NaN

  // Two sequences: one with 5 cached tokens + 3 new (a prefill chunk), one decoding 1 token at position 9.
  struct Seq { int cached, fresh; std::vector<int32_t> blocks; };
  std::vector<Seq> seqs = {{5, 3, {7, 2}}, {9, 1, {30, 0, 11}}};
  std::vector<std::vector<float>> keys(2), values(2);  // [seq_len * row] dense
  std::vector<std::vector<TokenId>> tokens(2);
  std::vector<SequenceChunk> chunks;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int len = seqs[s].cached + seqs[s].fresh;
    keys[s] = random_vector(static_cast<size_t>(len * row), rng);
    values[s] = random_vector(static_cast<size_t>(len * row), rng);
    for (int p = 0; p < len; ++p) {  // write every position into its paged slot
      const int64_t slot = static_cast<int64_t>(seqs[s].blocks[p / kBlock]) * kBlock + p % kBlock;
      std::memcpy(&k_cache[slot * row], &keys[s][p * row], row * 4);
      std::memcpy(&v_cache[slot * row], &values[s][p * row], row * 4);
      for (int64_t i = 0; i < row; ++i) {
        k_cache16[slot * row + i] = f32_to_f16(keys[s][p * row + i]);
        v_cache16[slot * row + i] = f32_to_f16(values[s][p * row + i]);
      }
    }
    tokens[s].assign(static_cast<size_t>(seqs[s].fresh), 1);
  }
  for (size_t s = 0; s < seqs.size(); ++s)
    chunks.push_back({tokens[s], seqs[s].cached, seqs[s].blocks, LogitsWanted::kLast});
  BatchBuilder builder;
  const ForwardBatch& batch = builder.build(chunks, kBlock);
  const int64_t T = batch.num_tokens;
  const std::vector<float> q = random_vector(static_cast<size_t>(T * kHeads * kHeadDim), rng);
  std::vector<float> out(q.size(), NAN);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  if (f16)
    cpu::paged_attention_f16(out.data(), q.data(), k_cache16.data(), v_cache16.data(), spec, kHeads, batch, scale);
  else
    cpu::paged_attention_f32(out.data(), q.data(), k_cache.data(), v_cache.data(), spec, kHeads, batch, scale);

  int64_t t = 0;
  double max_diff = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (int i = 0; i < seqs[s].fresh; ++i, ++t) {
      const int pos = seqs[s].cached + i;
      for (int h = 0; h < kHeads; ++h) {
        const int kvh = h / (kHeads / kKvHeads);
        std::vector<double> p(static_cast<size_t>(pos + 1));
        double mx = -1e300, sum = 0;
        for (int j = 0; j <= pos; ++j) {
          double d = 0;
          for (int e = 0; e < kHeadDim; ++e)
            d += input(q[(t * kHeads + h) * kHeadDim + e]) * input(keys[s][j * row + kvh * kHeadDim + e]);
          p[j] = d * scale;
          mx = std::max(mx, p[j]);
        }
        for (double& v : p) sum += (v = std::exp(v - mx));
        for (int e = 0; e < kHeadDim; ++e) {
          double o = 0;
          for (int j = 0; j <= pos; ++j) o += input(p[j] / sum) * input(values[s][j * row + kvh * kHeadDim + e]);
          EXPECT_NEAR(out[(t * kHeads + h) * kHeadDim + e], o, 1e-5) << "seq " << s << " pos " << pos << " head " << h;
          if (f16) max_diff = std::max(max_diff, std::fabs(o - out[(t * kHeads + h) * kHeadDim + e]));
        }
      }
    }
  }
  if (f16) std::printf("[ measured ] fp16 KV attention against the reference: max |diff| %.3g\n", max_diff);
}

INSTANTIATE_TEST_SUITE_P(KvDtypes, PagedAttention, ::testing::Values(DType::kF32, DType::kF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(RmsNorm, MatchesFormula) {
  std::mt19937 rng(3);
  const int dim = 96;
  const std::vector<float> x = random_vector(2 * dim, rng);
  const std::vector<float> w = random_vector(dim, rng);
  std::vector<float> out(x.size());
  cpu::rms_norm_f32(out.data(), x.data(), w.data(), 2, dim, 1e-5f);
  for (int r = 0; r < 2; ++r) {
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
    const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int i = 0; i < dim; ++i) EXPECT_NEAR(out[r * dim + i], w[i] * x[r * dim + i] * inv, 1e-5);
  }
}

TEST(Rope, RotatesHalvesByPositionTimesFrequency) {
  const int head_dim = 4, heads = 2;
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};  // one token, two heads
  const std::vector<float> inv_freq = {0.5f, 0.25f};
  const int32_t pos = 3;
  cpu::rope_f32(x.data(), &pos, 1, heads, head_dim, inv_freq.data());
  const float in[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}};
  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < 2; ++i) {
      const double a = pos * inv_freq[i];
      EXPECT_NEAR(x[h * 4 + i], in[h][i] * std::cos(a) - in[h][i + 2] * std::sin(a), 1e-6);
      EXPECT_NEAR(x[h * 4 + i + 2], in[h][i + 2] * std::cos(a) + in[h][i] * std::sin(a), 1e-6);
    }
  }
}

TEST(Rope, PositionZeroIsIdentity) {
  std::vector<float> x = {1, -2, 3, 0.5f};
  const std::vector<float> original = x;
  const std::vector<float> inv_freq = {1.0f, 0.01f};
  const int32_t pos = 0;
  cpu::rope_f32(x.data(), &pos, 1, 1, 4, inv_freq.data());
  EXPECT_EQ(x, original);
}

}  // namespace
}  // namespace pagoda
