// GPU tests of the FP8 W8A8 linears (kernels/fp8_linear.h, backend/cuda/fp8_gemm.h): the activation
// quantization equals the CPU reference's codes and scales bit for bit (per token, static with saturation,
// an all-zero row); the GEMV (1..16 tokens) and cuBLASLt's GEMM (more) against a float64 reference of the
// same codes over odd shapes (N not a multiple of 16, K a multiple of 16 only); the SwiGLU and RoPE epilogues
// equal the plain kernel then the unfused steps, bit for bit. A bandwidth table on Llama-3-8B's shapes is
// printed under PAGODA_PROFILE=1.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "pagoda/backend/cpu/linear_quant.h"
#include "pagoda/backend/cuda/fp8_gemm.h"
#include "pagoda/core/dtype.h"
#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/elementwise.h"
#include "pagoda/kernels/fp8_linear.h"

namespace pagoda {
namespace {

using test::DeviceArray;
using test::random_bf16;
using test::time_ms;
namespace k = kernels;

k::bf16* bf(uint16_t* p) { return reinterpret_cast<k::bf16*>(p); }

// Random e4m3 codes (no NaN), rows padded to kFp8RowAlignment with zeros, and positive scales.
struct RandomFp8Rows {
  RandomFp8Rows(int n, int kk, uint64_t seed) : n(n), k(kk) {
    const int padded = (n + k::kFp8RowAlignment - 1) / k::kFp8RowAlignment * k::kFp8RowAlignment;
    std::mt19937_64 rng(seed);
    codes.assign(static_cast<size_t>(padded) * kk, 0);
    scales.assign(static_cast<size_t>(padded), 0.0f);
    for (size_t i = 0; i < static_cast<size_t>(n) * kk; ++i) {
      uint8_t c;
      do c = static_cast<uint8_t>(rng()); while ((c & 0x7f) == 0x7f);
      codes[i] = c;
    }
    std::uniform_real_distribution<float> s(0.5e-3f, 2e-3f);
    for (int r = 0; r < n; ++r) scales[r] = s(rng);
    d_codes = std::make_unique<DeviceArray<uint8_t>>(codes);
    d_scales = std::make_unique<DeviceArray<float>>(scales);
    rows = {d_codes->get(), d_scales->get(), n, kk};
  }
  float value(int r, int c) const { return f8e4m3_to_f32(codes[static_cast<size_t>(r) * k + c]); }
  int n, k;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  std::unique_ptr<DeviceArray<uint8_t>> d_codes;
  std::unique_ptr<DeviceArray<float>> d_scales;
  k::Fp8Rows rows;
};

// bf16 activations quantized on the device; their codes and scales back on the host.
struct QuantizedX {
  QuantizedX(const std::vector<uint16_t>& x, int T, int kk, float static_scale)
      : d_x(x), d_codes(static_cast<size_t>(T) * kk), d_scales(static_cast<size_t>(T)) {
    act = {d_codes.get(), d_scales.get()};
    k::quantize_fp8_rows(act, bf(d_x.get()), T, kk, static_scale, nullptr);
    codes = d_codes.download();
    scales = d_scales.download();
  }
  DeviceArray<uint16_t> d_x;
  DeviceArray<uint8_t> d_codes;
  DeviceArray<float> d_scales;
  k::Fp8Activations act;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};

TEST(Fp8Linear, ActivationCodesAndScalesEqualTheCpuReference) {
  PAGODA_SKIP_WITHOUT_GPU();
  for (const int kk : {16, 80, 4096, 20000}) {  // 20,000: past the values the kernel keeps in registers
    for (const float static_scale : {0.0f, 0.01f}) {  // 0.01: values past 4.48 saturate
      const int T = 37;
      std::vector<uint16_t> x = random_bf16(static_cast<size_t>(T) * kk, kk);
      for (int c = 0; c < kk; ++c) x[static_cast<size_t>(3) * kk + c] = f32_to_bf16(0.0f);  // an all-zero row
      for (int c = 0; c < kk; c += 7) x[static_cast<size_t>(5) * kk + c] = f32_to_bf16(c % 2 ? 3000.0f : -20.0f);
      QuantizedX q(x, T, kk, static_scale);
      const ActivationQuant a = static_scale > 0 ? ActivationQuant::kFp8Static : ActivationQuant::kFp8PerToken;
      int bad = 0;
      for (int t = 0; t < T; ++t) {
        std::vector<float> row(kk);
        for (int c = 0; c < kk; ++c) row[c] = bf16_to_f32(x[static_cast<size_t>(t) * kk + c]);
        const float s = cpu::fp8_activation_scale(row.data(), kk, a, static_scale);
        ASSERT_EQ(q.scales[t], s) << "K " << kk << " token " << t;
        for (int c = 0; c < kk; ++c)
          if (q.codes[static_cast<size_t>(t) * kk + c] != f32_to_e4m3_saturating(row[c] * (1.0f / s)) && ++bad <= 3)
            ADD_FAILURE() << "K " << kk << " token " << t << " col " << c << ": code "
                          << int(q.codes[static_cast<size_t>(t) * kk + c]) << " for " << row[c] << " * 1 / " << s;
      }
      EXPECT_EQ(bad, 0);
      EXPECT_EQ(q.scales[3], static_scale > 0 ? static_scale : cpu::kMinFp8ActivationScale) << "the zero row";
    }
  }
}

// out [T, N] against sum(code_x * code_w) * s_x * s_w in float64.
// `rel`: the GEMV rounds once to bf16 (half a step: 2^-9); cuBLASLt's path twice (its sums, then scaled).
// `mag_rel`: of the sum of |products|, beyond the rounding; the GEMV adds every 32 products into fp32 (1e-5
// covers fp32 sums of 4,112), cuBLASLt's Hopper FP8 GEMM keeps fewer bits in its tensor-core sums (this
// test's uniformly random codes span e4m3's whole range: measured up to 2.5e-4, at K = 336; bounded at 1e-3).
void expect_products(const RandomFp8Rows& w, const QuantizedX& q, const std::vector<uint16_t>& got, int T,
                     const char* what, double rel = 0.0040, double mag_rel = 1e-5) {
  int bad = 0;
  double worst = 0;  // (|got - want| beyond the rounding) / mag
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < w.n; r += w.n >= 1024 ? 13 : 1) {
      double want = 0, mag = 0;
      for (int c = 0; c < w.k; ++c) {
        const double p = static_cast<double>(f8e4m3_to_f32(q.codes[static_cast<size_t>(t) * w.k + c])) * w.value(r, c);
        want += p;
        mag += std::fabs(p);
      }
      const double scale = static_cast<double>(q.scales[t]) * w.scales[r];
      want *= scale;
      mag *= scale;
      const double g = bf16_to_f32(got[static_cast<size_t>(t) * w.n + r]);
      worst = std::max(worst, std::max(0.0, std::fabs(g - want) - rel * std::fabs(want)) / std::max(mag, 1e-30));
      if (!(std::fabs(g - want) <= rel * std::fabs(want) + mag_rel * mag + 1e-7) && ++bad <= 3)
        ADD_FAILURE() << what << " N " << w.n << " K " << w.k << " T " << T << " token " << t << " row " << r
                      << ": got " << g << ", want " << want;
    }
  EXPECT_EQ(bad, 0);
  std::printf("[ measured ] %s N %d K %d T %d: worst error beyond the rounding / sum |products| = %.2g\n", what, w.n,
              w.k, T, worst);
}

struct Shape {
  int n, k;
};
const Shape kShapes[] = {{4096, 4096}, {37, 208}, {100, 1040}, {48, 4112}, {8, 16}, {640, 336}};

TEST(Fp8Linear, GemvMatchesFloat64ForEveryTokenCount) {
  PAGODA_SKIP_WITHOUT_GPU();
  if (!k::fp8_w8a8_supported()) GTEST_SKIP() << "no FP8 tensor cores (compute capability < 8.9)";
  for (const Shape s : kShapes) {
    RandomFp8Rows w(s.n, s.k, s.n + s.k);
    QuantizedX q(random_bf16(static_cast<size_t>(k::kFp8GemvMaxTokens) * s.k, s.k), k::kFp8GemvMaxTokens, s.k, 0.0f);
    DeviceArray<uint16_t> d_out(static_cast<size_t>(k::kFp8GemvMaxTokens) * s.n);
    for (int T = 1; T <= k::kFp8GemvMaxTokens; T += T < 9 ? 1 : 7) {  // 1..9, 16
      ASSERT_TRUE(k::fp8_gemv_supported(w.rows, T));
      PAGODA_CUDA_CHECK(cudaMemset(d_out.get(), 0xff, d_out.size() * 2));
      k::fp8_gemv(bf(d_out.get()), q.act, w.rows, T, nullptr);
      expect_products(w, q, d_out.download(static_cast<size_t>(T) * s.n), T, "gemv");
      if (HasFailure()) return;
    }
  }
}

TEST(Fp8Linear, CublasLtGemmMatchesFloat64) {
  PAGODA_SKIP_WITHOUT_GPU();
  if (!k::fp8_w8a8_supported()) GTEST_SKIP() << "no FP8 tensor cores (compute capability < 8.9)";
  DeviceArray<uint8_t> workspace(size_t{32} << 20);
  cuda::Fp8Gemm gemm(nullptr, workspace.get(), workspace.size());
  for (const Shape s : {Shape{4096, 4096}, Shape{640, 336}, Shape{48, 4112}, Shape{256, 14336}}) {  // 14,336: down_proj
    RandomFp8Rows w(s.n, s.k, 3 * s.n + s.k);
    for (const int T : {17, 64, 301}) {
      QuantizedX q(random_bf16(static_cast<size_t>(T) * s.k, T + s.k), T, s.k, 0.0f);
      ASSERT_TRUE(gemm.supported(T, s.n, s.k)) << "N " << s.n << " K " << s.k << " T " << T;
      DeviceArray<uint16_t> d_out(static_cast<size_t>(T) * s.n);
      gemm.run(bf(d_out.get()), q.act, w.rows, T);
      expect_products(w, q, d_out.download(), T, "cuBLASLt", 0.0080, 1e-3);
      if (HasFailure()) return;
    }
  }
}

TEST(Fp8Linear, EpiloguesEqualThePlainKernelThenTheUnfusedStep) {
  PAGODA_SKIP_WITHOUT_GPU();
  if (!k::fp8_w8a8_supported()) GTEST_SKIP() << "no FP8 tensor cores (compute capability < 8.9)";
  const int nh = 4, nkv = 2, hd = 32, kk = 256, n = (nh + 2 * nkv) * hd, num_slots = 32, row = nkv * hd;
  RandomFp8Rows w(n, kk, 77);
  std::vector<float> inv_freq(hd / 2);
  for (int i = 0; i < hd / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / hd);
  DeviceArray<float> d_inv(inv_freq);
  for (const int T : {1, 6, 11, 16}) {
    SCOPED_TRACE(::testing::Message() << "T " << T);
    QuantizedX q(random_bf16(static_cast<size_t>(T) * kk, T), T, kk, 0.0f);
    DeviceArray<uint16_t> d_plain(static_cast<size_t>(T) * n), d_silu(static_cast<size_t>(T) * n / 2),
        d_silu_ref(static_cast<size_t>(T) * n / 2);
    k::fp8_gemv(bf(d_plain.get()), q.act, w.rows, T, nullptr);
    k::fp8_gemv_silu(bf(d_silu.get()), q.act, w.rows, T, nullptr);
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
      DeviceArray<uint16_t> qo(static_cast<size_t>(T) * nh * hd), kc(size_t{num_slots} * row), vc(size_t{num_slots} * row);
      PAGODA_CUDA_CHECK(cudaMemset(kc.get(), 0x7f, size_t{num_slots} * row * 2));
      PAGODA_CUDA_CHECK(cudaMemset(vc.get(), 0x7f, size_t{num_slots} * row * 2));
      const k::QkvRopeOutput o{bf(qo.get()), bf(kc.get()), bf(vc.get()), d_pos.get(), d_slots.get(), d_inv.get(),
                               1.0f, nh, nkv, hd};
      if (fused) {
        k::fp8_gemv_qkv_rope(o, q.act, w.rows, T, nullptr);
      } else {
        k::qkv_rope_store(o.q_out, bf(d_plain.get()), o.k_cache, o.v_cache, o.positions, o.slot_mapping, o.inv_freq,
                          o.scaling, T, nh, nkv, hd, nullptr);
      }
      results.push_back(qo.download());
      results.push_back(kc.download());
      results.push_back(vc.download());
    }
    EXPECT_EQ(results[0], results[3]) << "q_out";
    EXPECT_EQ(results[1], results[4]) << "k cache";
    EXPECT_EQ(results[2], results[5]) << "v cache";
    if (HasFailure()) return;
  }
}

// Positive scales for ProductScales: rows like a weight's (fp32 [n]), tokens like activations' ([t]).
std::vector<float> random_scales(size_t n, float lo, float hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// The scaling pass over cuBLASLt's unscaled sums: bf16(float(v) * s_w * s_x) exactly, 8 values a thread (N a multiple
// of 8) or 2 (not).
TEST(Fp8Linear, ScalingPassRoundsEachProductOnce) {
  PAGODA_SKIP_WITHOUT_GPU();
  for (const int n : {4096, 38}) {
    const int T = 3;
    const std::vector<uint16_t> raw = random_bf16(static_cast<size_t>(T) * n, n);
    const std::vector<float> sw = random_scales(static_cast<size_t>(n), 0.5e-3f, 2e-3f, 1), sx = random_scales(T, 1e-2f, 1e-1f, 2);
    DeviceArray<uint16_t> d_out(raw);
    DeviceArray<float> d_sw(sw), d_sx(sx);
    k::scale_fp8_products(bf(d_out.get()), d_sw.get(), d_sx.get(), T, n, nullptr);
    const std::vector<uint16_t> got = d_out.download();
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < n; ++c) {
        const size_t i = static_cast<size_t>(t) * n + c;
        ASSERT_EQ(got[i], f32_to_bf16(bf16_to_f32(raw[i]) * sw[c] * sx[t])) << "N " << n << " token " << t << " col " << c;
      }
  }
}

// The residual norm reading an output projection's unscaled sums (CudaOps::linear_add_rms_norm): the same bits as the
// scaling pass followed by the plain add_rms_norm, in the residual and the normed output. Hidden sizes: one 8-vector a
// thread (4096), several (8200), and the scalar path (4100, not a multiple of 8).
TEST(Fp8Linear, ResidualNormAppliesTheProductScalesAsThePassWould) {
  PAGODA_SKIP_WITHOUT_GPU();
  for (const int hidden : {4096, 8200, 4100}) {
    SCOPED_TRACE(::testing::Message() << "hidden " << hidden);
    const int T = 5;
    std::vector<uint16_t> raw = random_bf16(static_cast<size_t>(T) * hidden, hidden);
    for (auto& v : raw) v = f32_to_bf16(bf16_to_f32(v) * 4096.0f);  // sums of products, before their scales
    const std::vector<uint16_t> residual = random_bf16(static_cast<size_t>(T) * hidden, hidden + 1);
    const std::vector<uint16_t> norm_w = random_bf16(static_cast<size_t>(hidden), hidden + 2);
    const std::vector<float> sw = random_scales(static_cast<size_t>(hidden), 0.5e-3f, 2e-3f, 7);
    const std::vector<float> sx = random_scales(T, 1e-2f, 1e-1f, 8);
    DeviceArray<float> d_sw(sw), d_sx(sx);
    DeviceArray<uint16_t> d_w(norm_w), passed(raw), res_pass(residual), out_pass(raw.size());
    k::scale_fp8_products(bf(passed.get()), d_sw.get(), d_sx.get(), T, hidden, nullptr);
    k::add_rms_norm(bf(res_pass.get()), bf(passed.get()), bf(out_pass.get()), bf(d_w.get()), T, hidden, 1e-5f, nullptr);
    DeviceArray<uint16_t> unscaled(raw), res_fused(residual), out_fused(raw.size());
    k::add_rms_norm(bf(res_fused.get()), bf(unscaled.get()), bf(out_fused.get()), bf(d_w.get()), T, hidden, 1e-5f,
                    nullptr, k::ProductScales{d_sw.get(), d_sx.get()});
    EXPECT_EQ(res_fused.download(), res_pass.download()) << "residual";
    EXPECT_EQ(out_fused.download(), out_pass.download()) << "normed";
    EXPECT_NE(res_fused.download(), residual) << "the residual was updated";
  }
}

// The norms that also quantize their output for the next FP8 linear (CudaOps::linear_add_rms_norm in a W8A8 model):
// the codes and scales quantize_fp8_rows gives the same output, bit for bit, and the output itself unchanged. Hidden
// sizes an FP8 linear takes (K a multiple of 16): one 8-vector a thread, several; the scalar path through a norm
// weight that does not start on 16 bytes. A zero row takes the smallest scale.
TEST(Fp8Linear, NormsQuantizeTheirOutputAsQuantizeFp8RowsWould) {
  PAGODA_SKIP_WITHOUT_GPU();
  struct Case {
    int hidden;
    bool weight_off_16;  // the norm weight one element past a 16-byte boundary: the scalar path
  };
  for (const Case shape : {Case{4096, false}, Case{8208, false}, Case{4096 + 16, false}, Case{4096, true}}) {
    const int hidden = shape.hidden;
    for (const bool add : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "hidden " << hidden << (shape.weight_off_16 ? ", scalar" : "")
                                        << (add ? ", add_rms_norm" : ", rms_norm"));
      const int T = 5;
      std::vector<uint16_t> x = random_bf16(static_cast<size_t>(T) * hidden, hidden + 3);
      for (int c = 0; c < hidden; ++c) x[static_cast<size_t>(2) * hidden + c] = 0;  // row 2: zero
      std::vector<uint16_t> residual = random_bf16(static_cast<size_t>(T) * hidden, hidden + 4);
      for (int c = 0; c < hidden; ++c) residual[static_cast<size_t>(2) * hidden + c] = 0;
      const std::vector<uint16_t> norm_w = random_bf16(static_cast<size_t>(hidden) + 1, hidden + 5);
      DeviceArray<uint16_t> d_w_alloc(norm_w), d_x(x), res_plain(residual), out_plain(x.size()), res_fused(residual),
          out_fused(x.size());
      uint16_t* const w_at = d_w_alloc.get() + (shape.weight_off_16 ? 1 : 0);
      DeviceArray<uint8_t> codes_plain(x.size()), codes_fused(x.size());
      DeviceArray<float> scales_plain(T), scales_fused(T);
      const k::Fp8Activations fused{codes_fused.get(), scales_fused.get()};
      if (add) {
        k::add_rms_norm(bf(res_plain.get()), bf(d_x.get()), bf(out_plain.get()), bf(w_at), T, hidden, 1e-5f, nullptr);
        k::add_rms_norm(bf(res_fused.get()), bf(d_x.get()), bf(out_fused.get()), bf(w_at), T, hidden, 1e-5f, nullptr,
                        {}, fused);
      } else {
        k::rms_norm(bf(out_plain.get()), bf(d_x.get()), bf(w_at), T, hidden, 1e-5f, nullptr);
        k::rms_norm(bf(out_fused.get()), bf(d_x.get()), bf(w_at), T, hidden, 1e-5f, nullptr, fused);
      }
      k::quantize_fp8_rows(k::Fp8Activations{codes_plain.get(), scales_plain.get()}, bf(out_plain.get()), T, hidden,
                           0.0f, nullptr);
      EXPECT_EQ(out_fused.download(), out_plain.download()) << "normed";
      EXPECT_EQ(res_fused.download(), res_plain.download()) << "residual";
      EXPECT_EQ(codes_fused.download(), codes_plain.download()) << "codes";
      const std::vector<float> got = scales_fused.download();
      EXPECT_EQ(got, scales_plain.download()) << "scales";
      EXPECT_EQ(got[2], cpu::kMinFp8ActivationScale) << "the zero row";
    }
  }
}

// The kernels that read the unscaled sums (ProductScales): SwiGLU of the scaled gate and up, against float64 (the
// vector path, intermediate a multiple of 4, and the scalar one); the QKV store, V exactly the scaled value rounded
// once, Q and K rotated from it (float64, within two bf16 steps of the pair's magnitude).
TEST(Fp8Linear, ConsumersApplyTheProductScales) {
  PAGODA_SKIP_WITHOUT_GPU();
  const int T = 5;
  const std::vector<float> sx = random_scales(T, 1e-2f, 1e-1f, 3);
  DeviceArray<float> d_sx(sx);
  for (const int inter : {64, 6}) {
    SCOPED_TRACE(::testing::Message() << "intermediate " << inter);
    std::vector<uint16_t> raw = random_bf16(static_cast<size_t>(T) * 2 * inter, inter);
    for (auto& v : raw) v = f32_to_bf16(bf16_to_f32(v) * 4096.0f);  // sums of products, before their scales
    const std::vector<float> sw = random_scales(static_cast<size_t>(2 * inter), 0.5e-3f, 2e-3f, 4);
    DeviceArray<uint16_t> d_raw(raw), d_out(static_cast<size_t>(T) * inter);
    DeviceArray<float> d_sw(sw);
    k::silu_mul_interleaved(bf(d_out.get()), bf(d_raw.get()), T, inter, nullptr, k::ProductScales{d_sw.get(), d_sx.get()});
    const std::vector<uint16_t> got = d_out.download();
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < inter; ++j) {
        const size_t g = static_cast<size_t>(t) * 2 * inter + 2 * j;
        const double gate = static_cast<double>(bf16_to_f32(raw[g])) * sw[2 * j] * sx[t];
        const double up = static_cast<double>(bf16_to_f32(raw[g + 1])) * sw[2 * j + 1] * sx[t];
        const double want = gate / (1.0 + std::exp(-gate)) * up;
        const double v = bf16_to_f32(got[static_cast<size_t>(t) * inter + j]);
        ASSERT_LE(std::fabs(v - want), 0x1p-7 * std::fabs(want) + 1e-6) << "token " << t << " j " << j;
      }
  }
  const int nh = 4, nkv = 2, hd = 32, n = (nh + 2 * nkv) * hd, row = nkv * hd, half = hd / 2;
  std::vector<uint16_t> raw = random_bf16(static_cast<size_t>(T) * n, 5);
  for (auto& v : raw) v = f32_to_bf16(bf16_to_f32(v) * 4096.0f);
  const std::vector<float> sw = random_scales(static_cast<size_t>(n), 0.5e-3f, 2e-3f, 6);
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / hd);
  std::vector<int32_t> positions(T), slots(T);
  for (int t = 0; t < T; ++t) positions[t] = 31 * t + 2, slots[t] = 2 * t + 1;
  DeviceArray<uint16_t> d_raw(raw), qo(static_cast<size_t>(T) * nh * hd), kc(size_t{16} * row), vc(size_t{16} * row);
  DeviceArray<float> d_sw(sw), d_inv(inv_freq);
  DeviceArray<int32_t> d_pos(positions), d_slots(slots);
  k::qkv_rope_store(bf(qo.get()), bf(d_raw.get()), bf(kc.get()), bf(vc.get()), d_pos.get(), d_slots.get(), d_inv.get(),
                    1.0f, T, nh, nkv, hd, nullptr, k::ProductScales{d_sw.get(), d_sx.get()});
  const std::vector<uint16_t> q = qo.download(), kcache = kc.download(), vcache = vc.download();
  const auto scaled = [&](int t, int col) { return bf16_to_f32(raw[static_cast<size_t>(t) * n + col]) * sw[col] * sx[t]; };
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < nkv; ++h)
      for (int i = 0; i < hd; ++i)
        ASSERT_EQ(vcache[(static_cast<size_t>(slots[t]) * nkv + h) * hd + i], f32_to_bf16(scaled(t, (nh + nkv + h) * hd + i)))
            << "V token " << t << " head " << h << " element " << i;
    for (int h = 0; h < nh + nkv; ++h)
      for (int i = 0; i < half; ++i) {
        const double x0 = scaled(t, h * hd + 2 * i), x1 = scaled(t, h * hd + 2 * i + 1);
        const double a = static_cast<double>(static_cast<float>(positions[t]) * inv_freq[i]);
        const double want[2] = {x0 * std::cos(a) - x1 * std::sin(a), x1 * std::cos(a) + x0 * std::sin(a)};
        for (int e = 0; e < 2; ++e) {
          const size_t at = h < nh ? (static_cast<size_t>(t) * nh + h) * hd + i + e * half
                                   : (static_cast<size_t>(slots[t]) * nkv + h - nh) * hd + i + e * half;
          const double v = bf16_to_f32(h < nh ? q[at] : kcache[at]);
          ASSERT_LE(std::fabs(v - want[e]), 0x1p-7 * (std::fabs(x0) + std::fabs(x1)) + 1e-6)
              << "token " << t << " head " << h << " pair " << i << " element " << e;
        }
      }
  }
}

TEST(Fp8Linear, PrintsBandwidthOnLlamaShapes) {
  PAGODA_SKIP_WITHOUT_GPU();
  PAGODA_SKIP_UNLESS_PROFILING();
  if (!k::fp8_w8a8_supported()) GTEST_SKIP() << "no FP8 tensor cores";
  DeviceArray<uint8_t> workspace(size_t{32} << 20);
  cuda::Fp8Gemm gemm(nullptr, workspace.get(), workspace.size());
  for (const Shape s : {Shape{6144, 4096}, Shape{4096, 4096}, Shape{28672, 4096}, Shape{4096, 14336}}) {
    const size_t bytes = static_cast<size_t>(s.n) * s.k + s.n * sizeof(float);
    const int copies = static_cast<int>(std::max<size_t>(1, (size_t{256} << 20) / bytes));
    std::vector<std::unique_ptr<RandomFp8Rows>> ws;
    for (int i = 0; i < copies; ++i) ws.push_back(std::make_unique<RandomFp8Rows>(s.n, s.k, i));
    QuantizedX q(random_bf16(size_t{1024} * s.k, 9), 1024, s.k, 0.0f);
    DeviceArray<uint16_t> d_out(size_t{1024} * s.n), d_x(random_bf16(size_t{16} * s.k, 4));
    const double quantize_ms = time_ms(50, [&] { k::quantize_fp8_rows(q.act, bf(d_x.get()), 1, s.k, 0.0f, nullptr); });
    std::printf("[ fp8     ] quantize 1 x %d: %.2f us\n", s.k, quantize_ms * 1e3);
    for (const int T : {1, 2, 4, 8, 16, 32, 64, 128, 256, 1024}) {
      int call = 0;
      const double ms = time_ms(20 * copies, [&] {
        const RandomFp8Rows& w = *ws[call++ % copies];
        if (T <= k::kFp8GemvMaxTokens) {
          k::fp8_gemv(bf(d_out.get()), q.act, w.rows, T, nullptr);
        } else {
          gemm.run(bf(d_out.get()), q.act, w.rows, T);
        }
      });
      std::printf("[ fp8     ] %-8s T=%4d N=%6d K=%6d: %8.2f us, %7.1f GB/s, %6.1f TFLOP/s\n",
                  T <= k::kFp8GemvMaxTokens ? "gemv" : "cublasLt", T, s.n, s.k, ms * 1e3,
                  static_cast<double>(bytes) / (ms * 1e-3) / 1e9, 2.0 * T * s.n * s.k / (ms * 1e-3) / 1e12);
    }
  }
  PAGODA_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace pagoda
