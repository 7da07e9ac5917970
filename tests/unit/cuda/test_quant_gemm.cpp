// GPU tests of the quantized GEMM for many tokens (kernels/quant_gemm.h), every form: against a float64 reference of
// the CPU's fp32 values (the mma.sync form, every zeros form) or of those values rounded to bf16 as each Hopper form
// rounds them (Values; both forms of params), on the odd shapes real models have (N not a multiple of 16 or of
// the 128 rows of a block, K a multiple of 16 only, groups of 16 to K), at token counts inside one block of tokens,
// across several, and with K cut into slices; a token's outputs do not depend on the tokens beside it for one
// slicing. A table of times on Llama-3-8B's shapes against cuBLAS (bf16 weights, and the bf16 copy of the quantized
// ones the GEMM replaces) is printed under PAGODA_PROFILE=1.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "../backend/random_quant_weight.h"
#include "cuda_test_util.h"
#include "quant_tiles_testing.h"
#include "pagoda/backend/mma_layout/quant_tiles.h"
#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/quant_gemm.h"
#include "pagoda/kernels/quant_gemv.h"

namespace pagoda {
namespace {

using test::DeviceArray;
using test::DeviceTiles;
using test::QuantCase;
using test::QuantForm;
using test::random_bf16;
using test::RandomQuantWeight;
using test::time_ms;
namespace k = kernels;

__nv_bfloat16* bf(uint16_t* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

// Which values a form multiplies: the CPU's fp32 values (the mma.sync form), those rounded to bf16 (the Hopper
// forms), or for 4-bit codes with zero points in groups of whole chunks (q - z) s_hi + bf16((q - z) s_lo) rounded once
// (the warp-specialized form's split scales; bf16 of the fp32 value otherwise).
enum class Values { kFp32, kBf16, kBf16SplitScales };

struct GemmForm {
  bool (*supported)(const void*, const k::QuantMatrix&, int);
  size_t (*workspace_bytes)(const k::QuantMatrix&, int);
  void (*run)(__nv_bfloat16*, const __nv_bfloat16*, const k::QuantMatrix&, int, void*, cudaStream_t);
  Values values;
};
const GemmForm kMmaSync{k::quant_gemm_supported, k::quant_gemm_workspace_bytes, k::quant_gemm, Values::kFp32};
const GemmForm kWgmma{k::quant_gemm_wgmma_supported, k::quant_gemm_wgmma_workspace_bytes, k::quant_gemm_wgmma,
                      Values::kBf16};
const GemmForm kWarpSpecialized{k::quant_gemm_ws_supported, k::quant_gemm_ws_workspace_bytes, k::quant_gemm_ws,
                                Values::kBf16SplitScales};

// x rounded once to bf16 (to nearest, ties to even).
double round_to_bf16(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e = 0;
  const double m = std::frexp(x, &e);  // x = m 2^e, 0.5 <= |m| < 1
  return std::ldexp(std::nearbyint(std::ldexp(m, 8)), e - 8);
}

// (q - z) s as the warp-specialized form rounds it: (q - z) s_hi + bf16((q - z) s_lo), one rounding (times_split).
double split_scale_product(double q_minus_z, double scale) {
  const double hi = round_to_bf16(scale), lo = round_to_bf16(scale - hi);
  return round_to_bf16(q_minus_z * hi + round_to_bf16(q_minus_z * lo));  // both products and the sum exact in double
}

// Whether the warp-specialized form scales these tiles as split_scale_product: 4-bit codes with zero points in
// groups of whole 64-column chunks (quant_gemm_ws.cu's kSplit).
bool scales_split(const QuantTilesShape& s) {
  const int64_t steps_per_group = s.group_size >= s.k ? (s.k + kTileStepCols - 1) / kTileStepCols : s.group_size / kTileStepCols;
  return s.codes == TileCodes::kU4 && !s.offsets && steps_per_group % 4 == 0;
}

// The values as the warp-specialized form makes them (see Values).
void round_as_split_scales(std::vector<float>& values, const HostQuantTiles& t) {
  const bool split = scales_split(t.shape);
  for (int64_t r = 0; r < t.shape.n; ++r)
    for (int64_t col = 0; col < t.shape.k; ++col) {
      float& v = values[r * t.shape.k + col];
      if (!split) {
        v = bf16_to_f32(f32_to_bf16(v));
        continue;
      }
      const QuantTileEntry e = quant_tile_entry(t, r, col);
      v = static_cast<float>(split_scale_product(e.code - e.zero_or_offset, e.scale));  // z: a whole number
    }
}

// out [T, N] by `form`, with its workspace.
std::vector<uint16_t> run_gemm(const GemmForm& form, const k::QuantMatrix& m, const DeviceArray<uint16_t>& x, int T) {
  DeviceArray<uint16_t> out(static_cast<size_t>(T) * m.shape.n);
  PAGODA_CUDA_CHECK(cudaMemset(out.get(), 0xff, static_cast<size_t>(T) * m.shape.n * 2));
  const size_t ws = form.workspace_bytes(m, T);
  DeviceArray<uint8_t> workspace(ws);
  form.run(bf(out.get()), reinterpret_cast<const __nv_bfloat16*>(x.get()), m, T, ws ? workspace.get() : nullptr, nullptr);
  PAGODA_CUDA_CHECK(cudaDeviceSynchronize());
  return out.download();
}

// Every case at every token count against float64 sums of the CPU's values (rounded to bf16 first for a form that
// multiplies them so; Values).
void expect_matches_reference(const GemmForm& form, const std::vector<QuantCase>& cases, std::vector<int> tokens) {
  const int max_t = *std::max_element(tokens.begin(), tokens.end());
  for (const QuantCase& c : cases) {
    RandomQuantWeight rw(c.form, c.n, c.k, c.group, 3 * c.n + c.k);
    const HostQuantTiles tiles = pack_quant_tiles(tile_rows(rw.weight));
    DeviceTiles dev(tiles);
    test::TileValues values = test::tile_values(tiles);
    if (form.values == Values::kBf16)
      for (float& v : values.values) v = bf16_to_f32(f32_to_bf16(v));  // as dequantize_tiles_bf16 rounds them
    else if (form.values == Values::kBf16SplitScales)
      round_as_split_scales(values.values, tiles);
    const auto x = random_bf16(static_cast<size_t>(max_t) * c.k, c.k + 1);
    DeviceArray<uint16_t> d_x(x);
    for (const int T : tokens) {
      SCOPED_TRACE(::testing::Message() << test::quant_form_name(c.form) << " n " << c.n << " k " << c.k << " g "
                                        << c.group << " T " << T);
      ASSERT_TRUE(form.supported(d_x.get(), dev.m, T));
      const auto got = run_gemm(form, dev.m, d_x, T);
      const int bad = test::count_mismatches(got, x, values, c.n, c.k, T, T > 64 ? 7 : 1, c.n >= 1024 ? 13 : 1);
      ASSERT_EQ(bad, 0);
    }
  }
}

// For each pair of token counts with the same K slices (4096 x 4096 W4), the first count's outputs equal the first
// rows of the second's.
void expect_tokens_independent(const GemmForm& form, std::initializer_list<std::pair<int, int>> pairs) {
  RandomQuantWeight rw(QuantForm::kInt4Zeros, 4096, 4096, 128, 11);
  DeviceTiles dev(pack_quant_tiles(tile_rows(rw.weight)));
  const int n = 4096;
  int max_t = 0;
  for (const auto& [a, b] : pairs) max_t = std::max({max_t, a, b});
  DeviceArray<uint16_t> d_x(random_bf16(static_cast<size_t>(max_t) * 4096, 5));
  for (const auto& [a, b] : pairs) {
    SCOPED_TRACE(::testing::Message() << a << " and " << b << " tokens");
    ASSERT_EQ(form.workspace_bytes(dev.m, a) / a, form.workspace_bytes(dev.m, b) / b);
    const auto few = run_gemm(form, dev.m, d_x, a), many = run_gemm(form, dev.m, d_x, b);
    EXPECT_TRUE(std::equal(few.begin(), few.begin() + static_cast<int64_t>(a) * n, many.begin()));
  }
}

#define SKIP_WITHOUT_HOPPER()                                                          \
  do {                                                                                 \
    PAGODA_SKIP_WITHOUT_GPU();                                                         \
    if (!k::quant_gemm_wgmma_available()) GTEST_SKIP() << "the wgmma form needs sm_90"; \
  } while (0)

// The shared cases' zeros forms (quant_tiles_testing.h), and N past a block of 128 rows, groups of 3 k-steps (two
// groups in some stages).
std::vector<QuantCase> gemm_cases() {
  std::vector<QuantCase> cases;
  for (const QuantCase& c : test::kQuantCases)
    if (!test::offsets_form(c.form)) cases.push_back(c);
  cases.insert(cases.end(), {{QuantForm::kInt4Zeros, 300, 1024, 64},
                             {QuantForm::kInt4Zeros, 129, 544, 32},
                             {QuantForm::kInt4Zeros, 40, 336, 48}});
  return cases;
}

TEST(QuantGemm, MatchesFloat64ReferenceForEveryZerosFormAndTokenCount) {
  PAGODA_SKIP_WITHOUT_GPU();
  expect_matches_reference(kMmaSync, gemm_cases(), {1, 41, 64, 65, 130, k::kQuantGemmMaxTokens});  // 1-3 blocks of 64
}

TEST(QuantGemm, TokensDoNotDependOnTheTokensBesideThem) {
  PAGODA_SKIP_WITHOUT_GPU();
  expect_tokens_independent(kMmaSync, {{65, 128}, {129, 192}});  // two token blocks each; three
}

TEST(QuantGemm, RefusesTheOffsetsFormMisalignedActivationsAndLongSteps) {
  PAGODA_SKIP_WITHOUT_GPU();
  RandomQuantWeight offsets(QuantForm::kInt4Offsets, 64, 256, 32, 1), zeros(QuantForm::kInt4Zeros, 64, 256, 32, 1);
  DeviceTiles a(pack_quant_tiles(tile_rows(offsets.weight))), b(pack_quant_tiles(tile_rows(zeros.weight)));
  DeviceArray<uint16_t> d_x(size_t{64} * 256 + 8);
  EXPECT_FALSE(k::quant_gemm_supported(d_x.get(), a.m, 64));
  EXPECT_TRUE(k::quant_gemm_supported(d_x.get(), b.m, 64));
  EXPECT_FALSE(k::quant_gemm_supported(d_x.get() + 4, b.m, 64));  // 8 bytes past a 16-byte boundary
  EXPECT_FALSE(k::quant_gemm_supported(d_x.get(), b.m, 0));
  if (k::quant_gemm_max_tokens() == k::kQuantGemmMaxTokens) {  // (unless PAGODA_QUANT_GEMM_MAX_TOKENS moves it)
    EXPECT_FALSE(k::quant_gemm_supported(d_x.get(), b.m, k::kQuantGemmMaxTokens + 1));
  }
}

// Every shared case, both forms of params, N past a block of 128 rows, groups of 3 k-steps, and groups of whole chunks
// with K ending inside the last chunk (its last group short: the warp-specialized form's one-group chunks, masked).
std::vector<QuantCase> hopper_cases() {
  std::vector<QuantCase> cases(std::begin(test::kQuantCases), std::end(test::kQuantCases));
  cases.insert(cases.end(), {{QuantForm::kInt4Zeros, 300, 1024, 64},
                             {QuantForm::kInt4Zeros, 72, 1040, 64},
                             {QuantForm::kInt4Zeros, 129, 544, 32},
                             {QuantForm::kInt4Zeros, 40, 336, 48},
                             {QuantForm::kInt4Offsets, 300, 1024, 32},
                             {QuantForm::kInt8Offsets, 130, 2048, 32}});
  return cases;
}

TEST(QuantGemmWgmma, MatchesFloat64ReferenceOfTheBf16ValuesForEveryFormAndTokenCount) {
  SKIP_WITHOUT_HOPPER();
  expect_matches_reference(kWgmma, hopper_cases(), {1, 40, 65, 128, 129, 300});  // one, two and three blocks of 128
}

TEST(QuantGemmWarpSpecialized, MatchesFloat64ReferenceOfTheBf16ValuesForEveryFormAndTokenCount) {
  SKIP_WITHOUT_HOPPER();
  expect_matches_reference(kWarpSpecialized, hopper_cases(), {1, 40, 200, 256, 257, 600});  // 1, 2, 3 blocks of 256
}

// The split scales' values (split_scale_product, as the kernel computes them) against the bf16 copy's, bf16 of the
// fp32 product (q - z) s, on the host: the same for every half-precision scale (AWQ and GPTQ checkpoints store fp16
// scales, compressed-tensors bf16 ones: s - s_hi then has at most 3 bits, and every product is exact), and for fp32
// scales (pagoda's own quantizer) within one bf16 ulp, rarely different.
TEST(QuantGemmWarpSpecialized, SplitScalesGiveTheCopysValuesForHalfPrecisionScalesAndStayWithinAnUlp) {
  auto copy_value = [](int q_minus_z, float s) {
    return static_cast<double>(bf16_to_f32(f32_to_bf16(static_cast<float>(q_minus_z) * s)));
  };
  int64_t checked = 0;
  for (int exponent = -14; exponent <= 15; ++exponent)  // every normal fp16 magnitude
    for (int mantissa = 0; mantissa < 1024; ++mantissa) {
      const float s = std::ldexp(1.0f + mantissa / 1024.0f, exponent);
      for (int v = -16; v <= 15; ++v) {
        ASSERT_EQ(split_scale_product(v, s), copy_value(v, s)) << "q - z " << v << ", scale " << s;
        ++checked;
      }
    }
  EXPECT_EQ(checked, int64_t{30} * 1024 * 32);
  uint64_t state = 12345;
  int64_t differ = 0, total = 0;
  for (int i = 0; i < 100000; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const float s = std::ldexp(1.0f + static_cast<float>(state >> 40) / 16777216.0f, static_cast<int>(state % 40) - 30);
    for (int v = -16; v <= 15; ++v, ++total) {
      const double got = split_scale_product(v, s), want = copy_value(v, s);
      if (got == want) continue;
      ++differ;
      ASSERT_LE(std::fabs(got - want), std::ldexp(std::fabs(want), -7)) << "q - z " << v << ", scale " << s;  // an ulp
    }
  }
  std::printf("[ split   ] fp32 scales: %lld of %lld values differ from the copy's by one bf16 ulp\n",
              static_cast<long long>(differ), static_cast<long long>(total));
  EXPECT_LT(differ, total / 500);
}

TEST(QuantGemmWarpSpecialized, TokensDoNotDependOnTheTokensBesideThem) {
  SKIP_WITHOUT_HOPPER();
  expect_tokens_independent(kWarpSpecialized, {{1, 256}, {257, 512}});  // one token block each (K in slices); two
}

TEST(QuantGemmWgmma, TokensDoNotDependOnTheTokensBesideThem) {
  SKIP_WITHOUT_HOPPER();
  expect_tokens_independent(kWgmma, {{1, 128}, {129, 256}});  // one token block each (K in slices); two
}

TEST(QuantGemmWgmma, RefusesMisalignedActivationsAndNoTokens) {
  SKIP_WITHOUT_HOPPER();
  RandomQuantWeight offsets(QuantForm::kInt4Offsets, 64, 256, 32, 1);
  DeviceTiles a(pack_quant_tiles(tile_rows(offsets.weight)));
  DeviceArray<uint16_t> d_x(size_t{4096} * 256 + 8);
  EXPECT_TRUE(k::quant_gemm_wgmma_supported(d_x.get(), a.m, 4096));
  EXPECT_FALSE(k::quant_gemm_wgmma_supported(d_x.get() + 4, a.m, 64));  // 8 bytes past a 16-byte boundary
  EXPECT_FALSE(k::quant_gemm_wgmma_supported(d_x.get(), a.m, 0));
}

// Llama-3-8B's fused QKV, O, fused gate-up and down: microseconds and TFLOP/s of quant_gemm (W4 g128, int8 per row)
// against cuBLAS on bf16 weights and against the bf16 copy (dequantize_tiles_bf16, then cuBLAS) it replaces; several
// copies of the weights cycled so that every call reads HBM.
TEST(QuantGemm, PrintsTimesOnLlamaShapes) {
  PAGODA_SKIP_WITHOUT_GPU();
  PAGODA_SKIP_UNLESS_PROFILING();
  cublasHandle_t handle;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  struct Shape { int n, k; };
  const int kMaxT = 2048;
  // PAGODA_QUANT_GEMM_TABLE=N:T times one shape (the first with N rows) at T tokens alone, for a profiler.
  const char* only = std::getenv("PAGODA_QUANT_GEMM_TABLE");
  int only_n = 0, only_t = 0;
  if (only) std::sscanf(only, "%d:%d", &only_n, &only_t);
  for (const Shape s : {Shape{6144, 4096}, Shape{4096, 4096}, Shape{28672, 4096}, Shape{4096, 14336}}) {
    if (only_n && s.n != only_n) continue;
    DeviceArray<uint16_t> d_x(random_bf16(size_t{kMaxT} * s.k, 9)), d_out(size_t{kMaxT} * s.n),
        d_w(random_bf16(static_cast<size_t>(s.n) * s.k, 3)), scratch(static_cast<size_t>(s.n) * s.k);
    auto cublas = [&](const uint16_t* w, int T) {
      const float alpha = 1.0f, beta = 0.0f;
      cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, s.n, T, s.k, &alpha, w, CUDA_R_16BF, s.k, d_x.get(), CUDA_R_16BF, s.k,
                   &beta, d_out.get(), CUDA_R_16BF, s.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    for (const QuantForm form : {QuantForm::kInt4Zeros, QuantForm::kInt8Symmetric}) {
      const test::WeightCopies weights = test::weight_copies(form, s.n, s.k);
      const auto& devs = weights.copies;
      const int copies = static_cast<int>(devs.size());
      DeviceArray<uint8_t> workspace(size_t{64} << 20);
      for (const int T : {48, 64, 128, 192, 256, 512, 1024, 2048}) {
        if (only_t && T != only_t) continue;
        int call = 0;
        double gemm = 0, wide = 0, ws = 0;  // (0: the form does not take T)
        if (k::quant_gemm_supported(d_x.get(), devs[0]->m, T)) {  // (PAGODA_QUANT_GEMM_MAX_TOKENS raises the limit)
          ASSERT_LE(k::quant_gemm_workspace_bytes(devs[0]->m, T), size_t{64} << 20);
          gemm = time_ms(10 * copies, [&] {
            const k::QuantMatrix& m = devs[call++ % copies]->m;
            k::quant_gemm(bf(d_out.get()), reinterpret_cast<const __nv_bfloat16*>(d_x.get()), m, T, workspace.get(), nullptr);
          });
        }
        if (k::quant_gemm_wgmma_supported(d_x.get(), devs[0]->m, T)) {
          ASSERT_LE(k::quant_gemm_wgmma_workspace_bytes(devs[0]->m, T), size_t{64} << 20);
          wide = time_ms(10 * copies, [&] {
            const k::QuantMatrix& m = devs[call++ % copies]->m;
            k::quant_gemm_wgmma(bf(d_out.get()), reinterpret_cast<const __nv_bfloat16*>(d_x.get()), m, T, workspace.get(),
                                nullptr);
          });
        }
        if (k::quant_gemm_ws_supported(d_x.get(), devs[0]->m, T)) {
          ASSERT_LE(k::quant_gemm_ws_workspace_bytes(devs[0]->m, T), size_t{64} << 20);
          ws = time_ms(10 * copies, [&] {
            const k::QuantMatrix& m = devs[call++ % copies]->m;
            k::quant_gemm_ws(bf(d_out.get()), reinterpret_cast<const __nv_bfloat16*>(d_x.get()), m, T, workspace.get(),
                             nullptr);
          });
        }
        const double copy = time_ms(10, [&] {
          k::dequantize_tiles_bf16(bf(scratch.get()), devs[call++ % copies]->m, nullptr);
          cublas(scratch.get(), T);
        });
        const double dense = time_ms(10, [&] { cublas(d_w.get(), T); });
        const double flop = 2.0 * T * s.n * s.k;
        auto tflops = [&](double ms) { return ms > 0 ? flop / (ms * 1e-3) / 1e12 : 0.0; };
        auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
        std::printf("[ gemm    ] %-14s T=%4d N=%6d K=%6d: quant_gemm %8.2f us (%5.1f TFLOP/s), wgmma %8.2f us (%5.1f "
                    "TFLOP/s), bf16 copy + cuBLAS %8.2f us, cuBLAS bf16 %8.2f us (%5.1f TFLOP/s); mma.sync %.2fx the copy, "
                    "%.2fx bf16; wgmma %.2fx the copy, %.2fx bf16; warp-specialized %8.2f us (%5.1f TFLOP/s), %.2fx the copy, "
                    "%.2fx bf16\n",
                    test::quant_form_name(form), T, s.n, s.k, gemm * 1e3, tflops(gemm), wide * 1e3, tflops(wide),
                    copy * 1e3, dense * 1e3, tflops(dense), ratio(copy, gemm), ratio(dense, gemm), ratio(copy, wide),
                    ratio(dense, wide), ws * 1e3, tflops(ws), ratio(copy, ws), ratio(dense, ws));
      }
      if (only_n) break;
    }
    if (only_n) break;
  }
  PAGODA_CUDA_CHECK(cudaDeviceSynchronize());
  cublasDestroy(handle);
}

}  // namespace
}  // namespace pagoda
