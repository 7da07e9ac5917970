// GPU tests of the skinny decode GEMM (kernels/gemv.h): out [T, N] = x [T, K] · w [N, K]^T for T = 1..8
// against a float64 host reference, on shapes that take every path of the kernel (partial K chunks, K
// split between warps, N not a multiple of the rows per block), one lm_head-sized case, and a timing
// printout (GB/s of weights streamed; printed, never asserted).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "cuda_test_util.h"
#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/elementwise.h"
#include "pagoda/kernels/gemv.h"

namespace pagoda {
namespace {

using test::DeviceArray;
using test::random_bf16;
using test::time_ms;

namespace k = kernels;

k::bf16* bf(uint16_t* p) { return reinterpret_cast<k::bf16*>(p); }

// x_row · w_row in float64, and sum |x_k w_k| (the scale of the fp32 accumulation error).
void dot_ref(const uint16_t* x, const uint16_t* w, int kk, double* dot, double* mag) {
  double d = 0, m = 0;
  for (int i = 0; i < kk; ++i) {
    const double p = double{bf16_to_f32(x[i])} * bf16_to_f32(w[i]);
    d += p;
    m += std::fabs(p);
  }
  *dot = d;
  *mag = m;
}

// The output is rounded to bf16 (half a step: <= 2^-8 relative); fp32 sums add a little in |x||w| terms.
void expect_output_close(uint16_t got, double want, double mag, const char* what, int t, int64_t row) {
  const double g = bf16_to_f32(got);
  EXPECT_LE(std::fabs(g - want), 0.0040 * std::fabs(want) + 2e-5 * mag + 1e-6)
      << what << " token " << t << " row " << row << ": got " << g << ", want " << want;
}

TEST(SkinnyGemm, SupportedShapes) {
  PAGODA_SKIP_WITHOUT_GPU();
  alignas(16) static uint16_t buf[64];
  EXPECT_TRUE(k::skinny_gemm_supported(buf, buf, 1, 4096, 4096));
  EXPECT_TRUE(k::skinny_gemm_supported(buf, buf, k::kSkinnyGemmMaxTokens, 96, 64));
  EXPECT_FALSE(k::skinny_gemm_supported(buf, buf, 0, 4096, 4096));
  EXPECT_FALSE(k::skinny_gemm_supported(buf, buf, k::kSkinnyGemmMaxTokens + 1, 4096, 4096));
  EXPECT_FALSE(k::skinny_gemm_supported(buf, buf, 1, 4096, 4100));  // K % 8 != 0
  EXPECT_FALSE(k::skinny_gemm_supported(buf + 1, buf, 1, 4096, 4096));
  EXPECT_FALSE(k::skinny_gemm_supported(buf, buf + 4, 1, 4096, 4096));
}

// The gate-up GEMM with its SwiGLU epilogue: rows 2j / 2j + 1 of w are gate_j / up_j; each product is
// rounded to bf16 before silu(g) * u, so the reference rounds the float64 products the same way. Shapes:
// K split four ways (N = 64), whole chunks, and the 8B model's 2 x 14336 x 4096.
TEST(SkinnyGemm, SiluEpilogueMatchesFloat64Reference) {
  PAGODA_SKIP_WITHOUT_GPU();
  struct Shape { int inter, k; };
  constexpr int kMaxT = k::kSkinnyGemmMaxTokens;
  for (const Shape s : {Shape{32, 2048}, Shape{1000, 4096}, Shape{14336, 4096}}) {
    const int n = 2 * s.inter;
    const auto x = random_bf16(static_cast<size_t>(kMaxT) * s.k, s.inter + 3);
    const auto w = random_bf16(static_cast<size_t>(n) * s.k, s.k + 4);
    DeviceArray<uint16_t> d_x(x), d_w(w), d_out(static_cast<size_t>(kMaxT) * s.inter);
    for (const int T : {1, 2, 3, 5, 8}) {
      SCOPED_TRACE(testing::Message() << "I " << s.inter << " K " << s.k << " T " << T);
      PAGODA_CUDA_CHECK(cudaMemset(d_out.get(), 0xff, static_cast<size_t>(kMaxT) * s.inter * 2));  // NaN
      k::skinny_gemm_silu(bf(d_out.get()), bf(d_x.get()), bf(d_w.get()), T, s.inter, s.k, nullptr);
      const auto got = d_out.download(static_cast<size_t>(kMaxT) * s.inter);
      for (int t = 0; t < kMaxT; ++t) {
        for (int j = 0; j < s.inter; j += (s.inter > 2000 ? 7 : 1)) {  // a sample of the large case
          const size_t i = static_cast<size_t>(t) * s.inter + j;
          if (t >= T) {
            ASSERT_EQ(got[i], 0xffff) << "wrote past token " << T - 1;
            continue;
          }
          double g, gmag, u, umag;
          dot_ref(x.data() + int64_t{t} * s.k, w.data() + (2 * int64_t{j}) * s.k, s.k, &g, &gmag);
          dot_ref(x.data() + int64_t{t} * s.k, w.data() + (2 * int64_t{j} + 1) * s.k, s.k, &u, &umag);
          const double gb = bf16_to_f32(f32_to_bf16(static_cast<float>(g)));
          const double ub = bf16_to_f32(f32_to_bf16(static_cast<float>(u)));
          const double want = gb / (1.0 + std::exp(-gb)) * ub;
          // Output rounding, plus fp32-sum error in g and u that may flip their bf16 rounding (<= 2^-8 each).
          const double tol = 0.0040 * std::fabs(want) + 0.0080 * (std::fabs(gb) + 1e-3) * std::fabs(ub) +
                             0.0080 * std::fabs(gb * ub) + 4e-5 * (gmag + umag) + 1e-6;
          EXPECT_LE(std::fabs(bf16_to_f32(got[i]) - want), tol) << "token " << t << " output " << j;
          if (HasFailure()) return;
        }
      }
    }
  }
}

// The QKV GEMM with RoPE and the KV store in its epilogue against the two kernels it replaces (skinny_gemm
// into qkv, then qkv_rope_store, itself checked against a float64 reference): the same bits in q_out and in
// both caches, padding tokens (slot -1) caching nothing. Llama-3-8B's heads, and a small K split across warps.
TEST(SkinnyGemm, QkvRopeEpilogueEqualsGemmThenRopeStore) {
  PAGODA_SKIP_WITHOUT_GPU();
  struct Case { int nh, nkv, hd, k; };
  for (const Case c : {Case{32, 8, 128, 4096}, Case{4, 2, 16, 64}}) {
    const int n = (c.nh + 2 * c.nkv) * c.hd, row = c.nkv * c.hd, num_slots = 64;
    const auto w = random_bf16(static_cast<size_t>(n) * c.k, c.k + 9);
    std::vector<float> inv_freq(c.hd / 2);
    for (int i = 0; i < c.hd / 2; ++i) inv_freq[i] = std::pow(500000.0f, -2.0f * i / c.hd);
    DeviceArray<uint16_t> d_w(w);
    DeviceArray<float> d_inv(inv_freq);
    for (const int T : {1, 2, 5, 8}) {
      SCOPED_TRACE(testing::Message() << "heads " << c.nh << "/" << c.nkv << " hd " << c.hd << " T " << T);
      const auto x = random_bf16(static_cast<size_t>(T) * c.k, T + 10);
      std::vector<int32_t> positions(T), slots(T);
      for (int t = 0; t < T; ++t) {
        positions[t] = 1000 * t + 7;
        slots[t] = t == 1 ? -1 : (5 * t + 3) % num_slots;  // token 1: padding
      }
      DeviceArray<uint16_t> d_x(x), d_qkv(static_cast<size_t>(T) * n);
      DeviceArray<int32_t> d_pos(positions), d_slots(slots);
      std::vector<std::vector<uint16_t>> results;
      for (const bool fused : {true, false}) {
        DeviceArray<uint16_t> q(static_cast<size_t>(T) * c.nh * c.hd), kc(size_t{num_slots} * row),
            vc(size_t{num_slots} * row);
        PAGODA_CUDA_CHECK(cudaMemset(kc.get(), 0x7f, size_t{num_slots} * row * 2));
        PAGODA_CUDA_CHECK(cudaMemset(vc.get(), 0x7f, size_t{num_slots} * row * 2));
        const k::QkvRopeOutput o{bf(q.get()), bf(kc.get()), bf(vc.get()), d_pos.get(), d_slots.get(), d_inv.get(),
                                 1.1f, c.nh, c.nkv, c.hd};
        if (fused) {
          k::skinny_gemm_qkv_rope(o, bf(d_x.get()), bf(d_w.get()), T, c.k, nullptr);
        } else {
          k::skinny_gemm(bf(d_qkv.get()), bf(d_x.get()), bf(d_w.get()), T, n, c.k, nullptr);
          k::qkv_rope_store(o.q_out, bf(d_qkv.get()), o.k_cache, o.v_cache, o.positions, o.slot_mapping, o.inv_freq,
                            o.scaling, T, c.nh, c.nkv, c.hd, nullptr);
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

// Every T on shapes reaching each path: (96, 64) a partial chunk only; (4096, 4096) whole chunks (at T = 1
// both of a warp's loaded before the PDL wait), K split for the larger T; (1000, 14336) K split four ways
// with a partial chunk per slice; (2500, 2056) a one-vector tail and N not a multiple of the rows per block.
TEST(SkinnyGemm, MatchesFloat64ReferenceForEveryTokenCount) {
  PAGODA_SKIP_WITHOUT_GPU();
  struct Shape { int n, k; };
  constexpr int kMaxT = k::kSkinnyGemmMaxTokens;
  for (const Shape s : {Shape{96, 64}, Shape{4096, 4096}, Shape{1000, 14336}, Shape{2500, 2056}}) {
    const auto x = random_bf16(static_cast<size_t>(kMaxT) * s.k, s.n + 1);
    const auto w = random_bf16(static_cast<size_t>(s.n) * s.k, s.k + 2);
    std::vector<double> want(static_cast<size_t>(kMaxT) * s.n), mag(want.size());
    for (int t = 0; t < kMaxT; ++t) {
      for (int r = 0; r < s.n; ++r)
        dot_ref(x.data() + int64_t{t} * s.k, w.data() + int64_t{r} * s.k, s.k, &want[int64_t{t} * s.n + r],
                &mag[int64_t{t} * s.n + r]);
    }
    DeviceArray<uint16_t> d_x(x), d_w(w), d_out(static_cast<size_t>(kMaxT) * s.n);
    for (int T = 1; T <= kMaxT; ++T) {
      SCOPED_TRACE(testing::Message() << "N " << s.n << " K " << s.k << " T " << T);
      ASSERT_TRUE(k::skinny_gemm_supported(d_x.get(), d_w.get(), T, s.n, s.k));
      PAGODA_CUDA_CHECK(cudaMemset(d_out.get(), 0xff, static_cast<size_t>(kMaxT) * s.n * 2));  // NaN
      k::skinny_gemm(bf(d_out.get()), bf(d_x.get()), bf(d_w.get()), T, s.n, s.k, nullptr);
      const auto got = d_out.download(static_cast<size_t>(kMaxT) * s.n);
      for (int t = 0; t < kMaxT; ++t) {
        for (int r = 0; r < s.n; ++r) {
          const size_t i = static_cast<size_t>(t) * s.n + r;
          if (t < T) {
            expect_output_close(got[i], want[i], mag[i], "skinny_gemm", t, r);
          } else {
            ASSERT_EQ(got[i], 0xffff) << "wrote past token " << T - 1;
          }
          if (HasFailure()) return;
        }
      }
    }
  }
}

void print_bandwidth(int T, int n, int kk, double ms) {
  const double bytes = 2.0 * (double(n) * kk + double(T) * kk + double(T) * n);
  std::printf("[ skinny  ] T=%d N=%6d K=%6d: %8.2f us, %7.1f GB/s\n", T, n, kk, ms * 1e3, bytes / (ms * 1e-3) / 1e9);
}

// lm_head of Llama 3 (128256 x 4096, 1 GB of weights made on the device): a sample of rows checked.
TEST(SkinnyGemm, LmHeadSizedMatchesOnSampledRows) {
  PAGODA_SKIP_WITHOUT_GPU();
  const int n = 128256, kk = 4096;
  DeviceArray<uint16_t> d_w(static_cast<size_t>(n) * kk), d_out(n);
  k::fill_random(bf(d_w.get()), int64_t{n} * kk, 7, 0.02f, 0.0f, nullptr);
  const auto x = random_bf16(kk, 3);
  DeviceArray<uint16_t> d_x(x);
  k::skinny_gemm(bf(d_out.get()), bf(d_x.get()), bf(d_w.get()), 1, n, kk, nullptr);
  const auto got = d_out.download(n);

  std::vector<uint16_t> w_row(kk);
  for (int i = 0; i < 300; ++i) {
    const int64_t row = i == 0 ? 0 : i == 1 ? n - 1 : (int64_t{i} * 2654435761u) % n;
    PAGODA_CUDA_CHECK(cudaMemcpy(w_row.data(), d_w.get() + row * kk, kk * 2, cudaMemcpyDeviceToHost));
    double want, mag;
    dot_ref(x.data(), w_row.data(), kk, &want, &mag);
    expect_output_close(got[row], want, mag, "lm_head", 0, row);
    if (HasFailure()) return;
  }
  const double ms =
      time_ms(10, [&] { k::skinny_gemm(bf(d_out.get()), bf(d_x.get()), bf(d_w.get()), 1, n, kk, nullptr); });
  print_bandwidth(1, n, kk, ms);
}

// Llama-3-8B's MLP shapes (up/gate: 14336 x 4096, down: 4096 x 14336), each 117 MB: more than L2 holds.
TEST(SkinnyGemm, PrintsBandwidthOnLlamaShapes) {
  PAGODA_SKIP_WITHOUT_GPU();
  PAGODA_SKIP_UNLESS_PROFILING();
  struct Shape { int n, k; };
  // Llama-3-8B's fused QKV, O, fused gate-up, gate alone, down. Several copies of the weights are cycled
  // so that together they exceed the 60 MB L2 and every call streams from HBM.
  for (const Shape s : {Shape{6144, 4096}, Shape{4096, 4096}, Shape{28672, 4096}, Shape{14336, 4096},
                        Shape{4096, 14336}}) {
    const int64_t elems = int64_t{s.n} * s.k;
    const int copies = static_cast<int>(std::max<int64_t>(1, (int64_t{256} << 20) / (2 * elems)));
    DeviceArray<uint16_t> d_w(static_cast<size_t>(elems * copies));
    DeviceArray<uint16_t> d_out(static_cast<size_t>(k::kSkinnyGemmMaxTokens) * s.n);
    k::fill_random(bf(d_w.get()), elems * copies, 11, 0.02f, 0.0f, nullptr);
    DeviceArray<uint16_t> d_x(random_bf16(static_cast<size_t>(k::kSkinnyGemmMaxTokens) * s.k, 5));
    for (const int T : {1, 2, 4, 8}) {
      int call = 0;
      const double ms = time_ms(20 * copies, [&] {
        const auto* w = bf(d_w.get()) + (call++ % copies) * elems;
        k::skinny_gemm(bf(d_out.get()), bf(d_x.get()), w, T, s.n, s.k, nullptr);
      });
      print_bandwidth(T, s.n, s.k, ms);
    }
  }
  PAGODA_CUDA_CHECK(cudaDeviceSynchronize());
}

TEST(SkinnyGemm, EmptyShapesLaunchNothing) {
  PAGODA_SKIP_WITHOUT_GPU();
  k::skinny_gemm(nullptr, nullptr, nullptr, 0, 4096, 4096, nullptr);
  k::skinny_gemm(nullptr, nullptr, nullptr, 1, 0, 4096, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace pagoda
