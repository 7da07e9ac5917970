// The FP8 KV store kernels (kernels/kv_fp8_store.h) against the CPU reference's row quantizer
// (kv/kv_fp8.h), bit for bit: every written row's codes and exponent, the exponent layout by block and
// head (block sizes 16 and 3), padding tokens skipped and other rows untouched; the QKV form against the
// bf16 qkv_rope_store followed by the host quantizer. Rows include zeros, exact 448 * 2^k maxima and
// magnitudes far from 1 (up to rows that saturate at the largest exponent). SKIPPED without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "pagoda/kernels/elementwise.h"
#include "pagoda/kernels/kv_fp8_store.h"
#include "pagoda/kv/kv_fp8.h"

namespace pagoda {
namespace {

using test::DeviceArray;

__nv_bfloat16* bf(uint16_t* p) { return reinterpret_cast<__nv_bfloat16*>(p); }
const __nv_bfloat16* cbf(const uint16_t* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }

constexpr uint8_t kCodeSentinel = 0x5A;
constexpr int8_t kExpSentinel = 77;

// Rows [rows, hd] of bf16: random, with row r scaled by a magnitude from a list that includes 0 and powers
// of two (so some maxima are exactly 448 * 2^k).
std::vector<uint16_t> test_rows(int rows, int hd, uint32_t seed) {
  const float scales[] = {1.0f, 0.0f, 448.0f, 3.5f, 1e-20f, 1e20f, 1e30f, 1000.0f};  // 1e30: saturates (e <= 63)
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<uint16_t> out(static_cast<size_t>(rows) * hd);
  for (int r = 0; r < rows; ++r) {
    const float s = scales[r % 8];
    for (int d = 0; d < hd; ++d) out[static_cast<size_t>(r) * hd + d] = f32_to_bf16(s * uni(rng));
    if (s == 448.0f) out[static_cast<size_t>(r) * hd + r % hd] = f32_to_bf16(-448.0f);  // amax exactly 448
  }
  return out;
}

// T token slots out of num_slots, shuffled, the last `pad` of them -1 (padding).
std::vector<int32_t> token_slots(int T, int num_slots, int pad, uint32_t seed) {
  std::vector<int32_t> all(num_slots);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), std::mt19937(seed));
  std::vector<int32_t> slots(all.begin(), all.begin() + T);
  for (int i = T - pad; i < T; ++i) slots[i] = -1;
  return slots;
}

// A device FP8 cache of num_slots slots, filled with sentinels.
struct Fp8Cache {
  DeviceArray<uint8_t> k, v;
  DeviceArray<int8_t> ke, ve;
  kernels::Fp8KvLayer layer;
  Fp8Cache(int num_slots, int nkv, int hd, int block_size)
      : k(static_cast<size_t>(num_slots) * nkv * hd), v(k.size()), ke(static_cast<size_t>(num_slots) * nkv),
        ve(ke.size()) {
    PAGODA_CUDA_CHECK(cudaMemset(k.get(), kCodeSentinel, k.size()));
    PAGODA_CUDA_CHECK(cudaMemset(v.get(), kCodeSentinel, v.size()));
    PAGODA_CUDA_CHECK(cudaMemset(ke.get(), kExpSentinel, ke.size()));
    PAGODA_CUDA_CHECK(cudaMemset(ve.get(), kExpSentinel, ve.size()));
    layer = {k.get(), v.get(), ke.get(), ve.get(), nkv, hd, block_size};
  }
};

// Expects the cache to hold, at every written slot, the host quantization of want_k / want_v rows
// ([num_slots, nkv, hd] bf16, for the slots in `slots`), and sentinels everywhere else.
void expect_cache(const Fp8Cache& c, int num_slots, const std::vector<int32_t>& slots,
                  const std::vector<uint16_t>& want_k, const std::vector<uint16_t>& want_v, const char* what) {
  const int nkv = c.layer.num_kv_heads, hd = c.layer.head_dim, bs = c.layer.block_size;
  const std::vector<uint8_t> codes[2] = {c.k.download(), c.v.download()};
  const std::vector<int8_t> exps[2] = {c.ke.download(), c.ve.download()};
  std::vector<bool> written(num_slots, false);
  for (int32_t s : slots)
    if (s >= 0) written[s] = true;
  std::vector<float> row(hd);
  std::vector<uint8_t> want_codes(hd);
  int checked = 0;
  for (int s = 0; s < num_slots; ++s) {
    for (int h = 0; h < nkv; ++h) {
      const size_t r = static_cast<size_t>(s) * nkv + h, e = (static_cast<size_t>(s / bs) * nkv + h) * bs + s % bs;
      for (int kv = 0; kv < 2; ++kv) {
        const uint8_t* got = codes[kv].data() + r * hd;
        if (!written[s]) {
          ASSERT_TRUE(std::all_of(got, got + hd, [](uint8_t x) { return x == kCodeSentinel; })) << what << " slot " << s;
          ASSERT_EQ(exps[kv][e], kExpSentinel) << what << " slot " << s;
          continue;
        }
        const std::vector<uint16_t>& want = kv == 0 ? want_k : want_v;
        for (int d = 0; d < hd; ++d) row[d] = bf16_to_f32(want[r * hd + d]);
        const int8_t want_exp = quantize_fp8_kv_row(row.data(), hd, want_codes.data());
        ASSERT_EQ(exps[kv][e], want_exp) << what << (kv ? " V" : " K") << " slot " << s << " head " << h;
        ASSERT_TRUE(std::equal(got, got + hd, want_codes.begin())) << what << (kv ? " V" : " K") << " slot " << s;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(KvFp8Store, StoreKvQuantizesEveryRowAsTheCpuReference) {
  PAGODA_SKIP_WITHOUT_GPU();
  for (const int hd : {8, 64, 128, 256}) {
    for (const int block_size : {16, 3}) {
      const int T = 21, nkv = 3, num_slots = 48, row = nkv * hd;  // whole blocks of 16 and of 3
      const auto k = test_rows(T * nkv, hd, 1 + hd), v = test_rows(T * nkv, hd, 2 + hd);
      const auto slots = token_slots(T, num_slots, 2, hd + block_size);
      Fp8Cache c(num_slots, nkv, hd, block_size);
      DeviceArray<uint16_t> dk(k), dv(v);
      DeviceArray<int32_t> ds(slots);
      kernels::store_kv_fp8(c.layer, cbf(dk.get()), cbf(dv.get()), ds.get(), T, nullptr);
      std::vector<uint16_t> want_k(static_cast<size_t>(num_slots) * row), want_v(want_k.size());
      for (int t = 0; t < T; ++t) {
        if (slots[t] < 0) continue;
        std::copy_n(k.begin() + int64_t{t} * row, row, want_k.begin() + int64_t{slots[t]} * row);
        std::copy_n(v.begin() + int64_t{t} * row, row, want_v.begin() + int64_t{slots[t]} * row);
      }
      SCOPED_TRACE("head_dim " + std::to_string(hd) + " block_size " + std::to_string(block_size));
      expect_cache(c, num_slots, slots, want_k, want_v, "store_kv_fp8");
    }
  }
}

// qkv_rope_store_fp8 = qkv_rope_store into a bf16 cache, each row then quantized; q_out identical. Also with
// ProductScales (qkv as an FP8 GEMM's unscaled sums): the same values from both. Also 1,100 tokens of 20 heads: a
// block's warps then take several heads each in turn (qkv_rope_grid); head_dim 256: four pairs a lane.
TEST(KvFp8Store, QkvRopeStoreIsTheBf16StoreQuantized) {
  PAGODA_SKIP_WITHOUT_GPU();
  struct Shape {
    int T, nh, nkv;
  };
  for (const Shape shape : {Shape{9, 4, 2}, Shape{1100, 16, 2}})
  for (const bool scaled : {false, true})
    for (const int hd : {16, 64, 128, 256}) {
      const int T = shape.T, nh = shape.nh, nkv = shape.nkv, num_slots = (T / 16 + 3) * 16, heads = nh + 2 * nkv;
      const int row = nkv * hd, block_size = 16;
      const auto qkv = test_rows(T * heads, hd, 40 + hd);  // as the GEMM wrote it (Q/K heads in RoPE-pair order)
      std::vector<int32_t> positions(T);
      for (int t = 0; t < T; ++t) positions[t] = 3 + 517 * t;
      const auto slots = token_slots(T, num_slots, 2, 9 * hd);
      std::vector<float> inv_freq(hd / 2);
      for (int i = 0; i < hd / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / hd);
      std::vector<float> row_scales(static_cast<size_t>(heads) * hd), token_scales(T);
      for (size_t i = 0; i < row_scales.size(); ++i) row_scales[i] = 0.5f + 0.01f * static_cast<float>(i % 97);
      for (int t = 0; t < T; ++t) token_scales[t] = 0.25f + 0.1f * static_cast<float>(t);
      DeviceArray<float> d_rs(row_scales), d_ts(token_scales);
      const kernels::ProductScales scales = scaled ? kernels::ProductScales{d_rs.get(), d_ts.get()} : kernels::ProductScales{};
      DeviceArray<uint16_t> d_qkv(qkv), q_bf16(static_cast<size_t>(T) * nh * hd), q_fp8(q_bf16.size());
      DeviceArray<uint16_t> kc(static_cast<size_t>(num_slots) * row), vc(kc.size());
      PAGODA_CUDA_CHECK(cudaMemset(kc.get(), 0, kc.size() * 2));
      PAGODA_CUDA_CHECK(cudaMemset(vc.get(), 0, vc.size() * 2));
      DeviceArray<int32_t> d_pos(positions), d_slots(slots);
      DeviceArray<float> d_inv(inv_freq);
      kernels::qkv_rope_store(bf(q_bf16.get()), cbf(d_qkv.get()), bf(kc.get()), bf(vc.get()), d_pos.get(), d_slots.get(),
                              d_inv.get(), 1.1f, T, nh, nkv, hd, nullptr, scales);
      Fp8Cache c(num_slots, nkv, hd, block_size);
      kernels::qkv_rope_store_fp8(bf(q_fp8.get()), cbf(d_qkv.get()), c.layer, d_pos.get(), d_slots.get(), d_inv.get(),
                                  1.1f, T, nh, nullptr, scales);
      SCOPED_TRACE("tokens " + std::to_string(T) + ", head_dim " + std::to_string(hd) + (scaled ? ", scaled" : ""));
      EXPECT_EQ(q_fp8.download(), q_bf16.download());
      expect_cache(c, num_slots, slots, kc.download(), vc.download(), "qkv_rope_store_fp8");
    }
}

}  // namespace
}  // namespace pagoda
