// GPU tests of the quantized decode GEMMs (kernels/quant_gemv.h) on every form of the internal
// representation, packed by backend/mma_layout: against a float64 reference of the CPU's fp32 values for
// token counts 1..40 (passes of 16 beyond 16; the few-token kernel at 1 to 8) and the odd shapes real models have (N not a multiple of 16, K a multiple of 16
// only, groups of 16 to K); the SwiGLU and RoPE epilogues equal the plain kernel followed by the unfused
// steps, bit for bit; the large-T dequantization equals the CPU values rounded to bf16. A bandwidth table
// on Llama-3-8B's shapes is printed under PAGODA_PROFILE=1. Act-order weights, sorted by group with their input
// gathered, against the weight as loaded.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "../backend/random_quant_weight.h"
#include "cuda_test_util.h"
#include "late_writes.h"
#include "quant_tiles_testing.h"
#include "pagoda/backend/cpu/act_order.h"
#include "pagoda/backend/mma_layout/quant_tiles.h"
#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/elementwise.h"
#include "pagoda/kernels/quant_gemv.h"
#include "pagoda/kernels/quant_gemv_few_tokens.h"

namespace pagoda {
namespace {

using test::DeviceArray;
using test::random_bf16;
using test::time_ms;
using test::QuantForm;
using test::QuantCase;
using test::RandomQuantWeight;
using test::DeviceTiles;
namespace k = kernels;

k::bf16* bf(uint16_t* p) { return reinterpret_cast<k::bf16*>(p); }

// The shared cases (quant_tiles_testing.h), and the few-token kernel's (quant_gemv_few_tokens.h): 4-bit 32-column
// groups (two a chunk), per row with K a multiple of 64 only; 8-bit 64-column groups, offsets (codes 0..31).
std::vector<QuantCase> gemv_cases() {
  std::vector<QuantCase> cases(std::begin(test::kQuantCases), std::end(test::kQuantCases));
  cases.insert(cases.end(), {{QuantForm::kInt4Offsets, 70, 576, 32},
                             {QuantForm::kInt4Offsets, 30, 320, 320},
                             {QuantForm::kInt8Offsets, 40, 1024, 64}});
  return cases;
}

// Whether the few-token kernel (4- and 8-bit codes) should take this case at T = 1 and 2.
bool few_tokens_case(const QuantCase& c) {
  return c.form != QuantForm::kFp8 && c.k % 64 == 0 &&
         (c.group == 32 || c.group == 64 || c.group == 128 || c.group >= c.k);
}

TEST(QuantGemv, MatchesFloat64ReferenceForEveryFormAndTokenCount) {
  PAGODA_SKIP_WITHOUT_GPU();
  for (const QuantCase& c : gemv_cases()) {
    RandomQuantWeight rw(c.form, c.n, c.k, c.group, c.n + c.k);
    const HostQuantTiles tiles = pack_quant_tiles(tile_rows(rw.weight));
    DeviceTiles dev(tiles);
    const test::TileValues values = test::tile_values(tiles);
    const size_t max_t = k::kQuantGemvMaxTokens;
    const auto x = random_bf16(max_t * c.k, c.k);
    DeviceArray<uint16_t> d_x(x), d_out(max_t * c.n);
    for (int T = 1; T <= k::kQuantGemvMaxTokens; T += (T < 9 ? 1 : T < 16 ? 7 : 12)) {  // .., 9, 16, 28, 40
      SCOPED_TRACE(::testing::Message() << test::quant_form_name(c.form) << " n " << c.n << " k " << c.k << " g "
                                        << c.group << " T " << T);
      ASSERT_TRUE(k::quant_gemv_supported(d_x.get(), dev.m, T));
      if (T <= 2) {  // (from 3 tokens on, x of K = 14,336 is too large for it)
        ASSERT_EQ(k::quant_gemv_few_tokens_takes(d_x.get(), dev.m, T), few_tokens_case(c));
      }
      PAGODA_CUDA_CHECK(cudaMemset(d_out.get(), 0xff, max_t * c.n * 2));
      k::quant_gemv(bf(d_out.get()), bf(d_x.get()), dev.m, T, nullptr);
      const auto got = d_out.download(static_cast<size_t>(T) * c.n);
      const int bad = test::count_mismatches(got, x, values, c.n, c.k, T, 1, c.n >= 1024 ? 13 : 1);  // large N: a sample of rows
      ASSERT_EQ(bad, 0);
    }
  }
}

// Act-order weights (backend/cpu/act_order.h) as the CUDA upload takes them: the columns sorted by group and packed,
// the input gathered by kernels::gather_columns, against the float64 reference of the weight in its loaded column
// order times the input as given; 4- and 8-bit codes, zero points and symmetric, groups of 16 to 128, 1 to 40 tokens.
// Then the same chain behind a kernel that writes x late (late_writes.h; x holds NaN until then): the gather lets
// the linear start before its own wait (kernels/launch.cuh), and the linear must still multiply the x written late.
TEST(QuantGemv, ActOrderSortedWithItsInputGatheredMatchesTheLoadedWeight) {
  PAGODA_SKIP_WITHOUT_GPU();
  const QuantCase cases[] = {{QuantForm::kInt4Zeros, 96, 1024, 128}, {QuantForm::kInt4Zeros, 37, 512, 32},
                             {QuantForm::kInt8Symmetric, 48, 1040, 16}, {QuantForm::kInt8Zeros, 33, 512, 64}};
  for (const QuantCase& c : cases) {
    RandomQuantWeight rw(c.form, c.n, c.k, c.group, 7 * c.n + c.k);
    std::vector<int32_t> perm(static_cast<size_t>(c.k));  // GPTQ's act order: columns in a random order, G to a group
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(static_cast<uint32_t>(c.k)));
    HostTensor g_idx(DType::kI32, {c.k});
    for (int64_t i = 0; i < c.k; ++i) g_idx.ptr<int32_t>()[perm[i]] = static_cast<int32_t>(i / c.group);
    Weight loaded = rw.weight;
    loaded.g_idx = g_idx.view();
    std::vector<HostTensor> storage;
    const std::optional<Weight> sorted = cpu::sort_columns_by_group(loaded, storage);
    ASSERT_TRUE(sorted.has_value());
    const HostQuantTiles tiles = pack_quant_tiles(tile_rows(*sorted));
    DeviceTiles dev(tiles);
    const int32_t* order = sorted->input_order.ptr<const int32_t>();
    const test::TileValues sorted_values = test::tile_values(tiles);
    test::TileValues values = sorted_values;  // in the loaded column order
    for (int64_t r = 0; r < c.n; ++r)
      for (int64_t j = 0; j < c.k; ++j) {
        values.values[r * c.k + order[j]] = sorted_values.values[r * c.k + j];
        values.offsets[r * c.k + order[j]] = sorted_values.offsets[r * c.k + j];
      }
    const size_t max_t = k::kQuantGemvMaxTokens;
    const auto x = random_bf16(max_t * c.k, c.k);
    DeviceArray<uint16_t> d_x(x), d_gathered(max_t * c.k), d_out(max_t * c.n);
    DeviceArray<int32_t> d_order(std::vector<int32_t>(order, order + c.k));
    for (int T : {1, 2, 5, 16, 40}) {
      SCOPED_TRACE(::testing::Message() << test::quant_form_name(c.form) << " n " << c.n << " k " << c.k << " g "
                                        << c.group << " T " << T);
      k::gather_columns(bf(d_gathered.get()), bf(d_x.get()), d_order.get(), T, static_cast<int>(c.k), nullptr);
      k::quant_gemv(bf(d_out.get()), bf(d_gathered.get()), dev.m, T, nullptr);
      ASSERT_EQ(test::count_mismatches(d_out.download(static_cast<size_t>(T) * c.n), x, values, c.n, c.k, T, 1, 1), 0);

      DeviceArray<uint16_t> d_late(max_t * c.k);
      PAGODA_CUDA_CHECK(cudaMemset(d_late.get(), 0xff, d_late.size() * sizeof(uint16_t)));  // bf16 NaN
      PAGODA_CUDA_CHECK(cudaMemset(d_gathered.get(), 0xff, d_gathered.size() * sizeof(uint16_t)));
      PAGODA_CUDA_CHECK(cudaMemset(d_out.get(), 0, d_out.size() * sizeof(uint16_t)));
      cudaStream_t stream;
      PAGODA_CUDA_CHECK(cudaStreamCreate(&stream));
      test::launch_late_copies({{d_x.get(), d_late.get(), static_cast<size_t>(T) * c.k * sizeof(uint16_t)}}, 200, stream);
      k::gather_columns(bf(d_gathered.get()), bf(d_late.get()), d_order.get(), T, static_cast<int>(c.k), stream);
      k::quant_gemv(bf(d_out.get()), bf(d_gathered.get()), dev.m, T, stream);
      PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream));
      PAGODA_CUDA_CHECK(cudaStreamDestroy(stream));
      EXPECT_EQ(test::count_mismatches(d_out.download(static_cast<size_t>(T) * c.n), x, values, c.n, c.k, T, 1, 1), 0)
          << "x written late";
    }
  }
}

TEST(QuantGemv, EpiloguesEqualThePlainKernelThenTheUnfusedStep) {
  PAGODA_SKIP_WITHOUT_GPU();
  for (const QuantForm form : {QuantForm::kInt4Zeros, QuantForm::kInt4Offsets, QuantForm::kInt8Symmetric, QuantForm::kFp8}) {
    // QKV of a small GQA model: 4 query heads, 2 KV heads of 32.
    const int nh = 4, nkv = 2, hd = 32, kk = 256, n = (nh + 2 * nkv) * hd, num_slots = 32, row = nkv * hd;
    RandomQuantWeight rw(form, n, kk, form == QuantForm::kFp8 ? kk : 32, 77);
    const HostQuantTiles tiles = pack_quant_tiles(tile_rows(rw.weight));
    DeviceTiles dev(tiles);
    std::vector<float> inv_freq(hd / 2);
    for (int i = 0; i < hd / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / hd);
    DeviceArray<float> d_inv(inv_freq);
    for (const int T : {1, 3, 6, 11, 16, 23}) {  // 1, 3: the few-token kernel (not FP8), or x staged in the ring; 23: two passes
      SCOPED_TRACE(::testing::Message() << test::quant_form_name(form) << " T " << T);
      const auto x = random_bf16(static_cast<size_t>(T) * kk, T);
      DeviceArray<uint16_t> d_x(x), d_plain(static_cast<size_t>(T) * n), d_silu(static_cast<size_t>(T) * n / 2),
          d_silu_ref(static_cast<size_t>(T) * n / 2);
      k::quant_gemv(bf(d_plain.get()), bf(d_x.get()), dev.m, T, nullptr);
      k::quant_gemv_silu(bf(d_silu.get()), bf(d_x.get()), dev.m, T, nullptr);
      k::silu_mul_interleaved(bf(d_silu_ref.get()), bf(d_plain.get()), T, n / 2, nullptr);
      EXPECT_EQ(d_silu.download(), d_silu_ref.download()) << "SwiGLU";

      std::vector<int32_t> positions(T), slots(T);
      for (int t = 0; t < T; ++t) {
        positions[t] = 97 * t + 3;
        slots[t] = t == 1 ? -1 : (3 * t + 1) % num_slots;
      }
      DeviceArray<int32_t> d_pos(positions), d_slots(slots);
      std::vector<std::vector<uint16_t>> results;
      for (const bool fused : {true, false}) {
        DeviceArray<uint16_t> q(static_cast<size_t>(T) * nh * hd), kc(size_t{num_slots} * row), vc(size_t{num_slots} * row);
        PAGODA_CUDA_CHECK(cudaMemset(kc.get(), 0x7f, size_t{num_slots} * row * 2));
        PAGODA_CUDA_CHECK(cudaMemset(vc.get(), 0x7f, size_t{num_slots} * row * 2));
        const k::QkvRopeOutput o{bf(q.get()), bf(kc.get()), bf(vc.get()), d_pos.get(), d_slots.get(), d_inv.get(),
                                 1.0f, nh, nkv, hd};
        if (fused) {
          k::quant_gemv_qkv_rope(o, bf(d_x.get()), dev.m, T, nullptr);
        } else {
          k::qkv_rope_store(o.q_out, bf(d_plain.get()), o.k_cache, o.v_cache, o.positions, o.slot_mapping, o.inv_freq,
                            o.scaling, T, nh, nkv, hd, nullptr);
        }
        results.push_back(q.download());
        results.push_back(kc.download());
        results.push_back(vc.download());
      }
      EXPECT_EQ(results[0], results[3]) << "q_out";
      EXPECT_EQ(results[1], results[4]) << "k cache";
      EXPECT_EQ(results[2], results[5]) << "v cache";
      if (HasFailure()) return;
    }
  }
}

// The residual norm between two few-token GEMVs (quant_gemv_few_tokens.h: ResidualAdd, NormedInput), as a decode step
// of a W4 or W8 model runs it (CudaOps::linear_add_rms_norm with a reader), against the kernels it replaces: the
// producer's plain GEMV, add_rms_norm, then the reader's GEMV (plain and SwiGLU) on the norm's output. The residual
// must come out bit for bit; the reader's outputs within a bf16 step of the reference (the sum of squares is added
// in another order, so 1 / rms may differ in its last bit). Hidden sizes of 576 (tiles not a multiple of the warps a
// block splits) and 4,096 (Llama's), 1 to 8 tokens.
TEST(QuantGemv, NormBetweenTwoGemvsEqualsAddRmsNormThenTheGemv) {
  PAGODA_SKIP_WITHOUT_GPU();
  struct Case {
    QuantForm form;
    int hidden, inner, reader_rows, group;
  };
  for (const Case& c : {Case{QuantForm::kInt4Zeros, 576, 1024, 200, 64}, Case{QuantForm::kInt4Offsets, 576, 640, 96, 32},
                        Case{QuantForm::kInt8Symmetric, 576, 1024, 128, 576}, Case{QuantForm::kInt4Zeros, 4096, 1024, 96, 128}}) {
    RandomQuantWeight producer(c.form, c.hidden, c.inner, c.group == c.hidden ? c.inner : c.group, 11 + c.hidden);
    RandomQuantWeight reader(c.form, c.reader_rows, c.hidden, c.group, 12 + c.hidden);
    DeviceTiles dev_p(pack_quant_tiles(tile_rows(producer.weight))), dev_r(pack_quant_tiles(tile_rows(reader.weight)));
    const int tiles = static_cast<int>(dev_p.m.shape.tiles());
    const float eps = 1e-5f;
    std::vector<uint16_t> gamma = random_bf16(c.hidden, 5);
    for (auto& g : gamma) g = f32_to_bf16(1.0f + 0.5f * bf16_to_f32(g));
    DeviceArray<uint16_t> d_gamma(gamma);
    for (const int T : {1, 2, 3, 5, 8}) {
      SCOPED_TRACE(::testing::Message() << test::quant_form_name(c.form) << " hidden " << c.hidden << " T " << T);
      ASSERT_TRUE(k::quant_gemv_few_tokens_takes(d_gamma.get(), dev_p.m, T));
      ASSERT_TRUE(k::quant_gemv_few_tokens_takes(d_gamma.get(), dev_r.m, T));
      const auto x = random_bf16(static_cast<size_t>(T) * c.inner, 7 + T);
      auto residual = random_bf16(static_cast<size_t>(T) * c.hidden, 9 + T);
      for (auto& r : residual) r = f32_to_bf16(8.0f * bf16_to_f32(r));  // the residual stream larger than an update
      const size_t th = static_cast<size_t>(T) * c.hidden;
      DeviceArray<uint16_t> d_x(x), res_ref(residual), res(residual), proj(th), normed(th);
      DeviceArray<float> squares(static_cast<size_t>(T) * tiles);
      k::quant_gemv(bf(proj.get()), bf(d_x.get()), dev_p.m, T, nullptr);
      k::add_rms_norm(bf(res_ref.get()), bf(proj.get()), bf(normed.get()), bf(d_gamma.get()), T, c.hidden, eps, nullptr);
      k::quant_gemv_few_tokens(k::Epilogue::kPlain, nullptr, {}, bf(d_x.get()), dev_p.m, T, nullptr, {},
                               k::ResidualAdd{bf(res.get()), squares.get()});
      ASSERT_EQ(res.download(), res_ref.download()) << "the residual after the add";
      // The tile sums against float64 over the residual's rows.
      const auto r_host = res.download();
      const auto sq = squares.download();
      for (int t = 0; t < T; ++t) {
        double want = 0.0, got = 0.0;
        for (int i = 0; i < c.hidden; ++i) want += std::pow(static_cast<double>(bf16_to_f32(r_host[t * c.hidden + i])), 2);
        for (int i = 0; i < tiles; ++i) got += sq[static_cast<size_t>(t) * tiles + i];
        EXPECT_NEAR(got, want, want * 1e-5) << "token " << t;
      }
      const k::NormedInput input{bf(res.get()), squares.get(), bf(d_gamma.get()), tiles, eps};
      const size_t out_n = static_cast<size_t>(T) * c.reader_rows;
      for (const k::Epilogue e : {k::Epilogue::kPlain, k::Epilogue::kSilu}) {
        SCOPED_TRACE(e == k::Epilogue::kPlain ? "plain" : "SwiGLU");
        const size_t n = e == k::Epilogue::kPlain ? out_n : out_n / 2;
        DeviceArray<uint16_t> want(n), got(n);
        PAGODA_CUDA_CHECK(cudaMemset(got.get(), 0xff, n * 2));
        if (e == k::Epilogue::kPlain) {
          k::quant_gemv(bf(want.get()), bf(normed.get()), dev_r.m, T, nullptr);
        } else {
          k::quant_gemv_silu(bf(want.get()), bf(normed.get()), dev_r.m, T, nullptr);
        }
        k::quant_gemv_few_tokens(e, bf(got.get()), {}, nullptr, dev_r.m, T, nullptr, input);
        const auto w = want.download(), g = got.download();
        float scale = 0.0f;
        for (const uint16_t v : w) scale = std::max(scale, std::fabs(bf16_to_f32(v)));
        int far = 0, differ = 0;
        for (size_t i = 0; i < n; ++i) {
          const float a = bf16_to_f32(g[i]), b = bf16_to_f32(w[i]);
          differ += a != b;
          far += !(std::fabs(a - b) <= 0x1p-7f * std::fabs(b) + 1e-3f * scale);
        }
        EXPECT_EQ(far, 0) << differ << " of " << n << " outputs differ";
        EXPECT_LE(differ, static_cast<int>(n / 20) + 1) << "more than a few outputs moved";
      }
      if (HasFailure()) return;
    }
  }
}

TEST(QuantGemv, DequantizedTilesAreTheCpuValuesInBf16) {
  PAGODA_SKIP_WITHOUT_GPU();
  for (const QuantCase& c : gemv_cases()) {
    SCOPED_TRACE(::testing::Message() << test::quant_form_name(c.form) << " n " << c.n << " k " << c.k);
    RandomQuantWeight rw(c.form, c.n, c.k, c.group, c.n * 3 + c.k);
    const HostQuantTiles tiles = pack_quant_tiles(tile_rows(rw.weight));
    DeviceTiles dev(tiles);
    DeviceArray<uint16_t> d_out(static_cast<size_t>(c.n) * c.k);
    k::dequantize_tiles_bf16(bf(d_out.get()), dev.m, nullptr);
    const auto got = d_out.download();
    int bad = 0;
    for (int64_t r = 0; r < c.n; ++r)
      for (int64_t col = 0; col < c.k; ++col)
        if (got[r * c.k + col] != f32_to_bf16(quant_tile_value(tiles, r, col)) && ++bad <= 3)
          ADD_FAILURE() << "row " << r << " col " << col;
    ASSERT_EQ(bad, 0);
  }
}

// Llama-3-8B's fused QKV, O, fused gate-up and down in W4 g128, int8 per channel and FP8 per channel: GB/s of
// codes and params streamed per call (several copies cycled, so every call reads HBM, not L2).
TEST(QuantGemv, PrintsBandwidthOnLlamaShapes) {
  PAGODA_SKIP_WITHOUT_GPU();
  PAGODA_SKIP_UNLESS_PROFILING();
  struct Shape { int n, k; };
  for (const QuantForm form : {QuantForm::kInt4Zeros, QuantForm::kInt8Symmetric, QuantForm::kFp8}) {
    for (const Shape s : {Shape{6144, 4096}, Shape{4096, 4096}, Shape{28672, 4096}, Shape{4096, 14336}}) {
      const test::WeightCopies weights = test::weight_copies(form, s.n, s.k);
      const auto& devs = weights.copies;
      const int copies = static_cast<int>(devs.size());
      const size_t bytes = weights.bytes;
      DeviceArray<uint16_t> d_x(random_bf16(size_t{16} * s.k, 9)), d_out(size_t{16} * s.n);
      for (const int T : {1, 2, 4, 8, 16}) {
        int call = 0;
        const double ms = time_ms(20 * copies, [&] {
          k::quant_gemv(bf(d_out.get()), bf(d_x.get()), devs[call++ % copies]->m, T, nullptr);
        });
        std::printf("[ quant   ] %-14s T=%2d N=%6d K=%6d: %8.2f us, %7.1f GB/s, %6.1f TFLOP/s\n",
                    test::quant_form_name(form), T, s.n, s.k, ms * 1e3, static_cast<double>(bytes) / (ms * 1e-3) / 1e9,
                    2.0 * T * s.n * s.k / (ms * 1e-3) / 1e12);
      }
    }
  }
  PAGODA_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace pagoda
