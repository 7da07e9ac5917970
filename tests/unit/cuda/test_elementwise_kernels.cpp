// GPU tests of the elementwise kernels (kernels/elementwise.h) against host references: copies, gathers
// and conversions bit-exact; norms, RoPE and SiLU within bf16 rounding of a float/double reference. Shapes
// cover the 16-byte and the scalar paths (sizes not a multiple of 8, misaligned pointers).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/elementwise.h"

namespace pagoda {
namespace {

using test::DeviceArray;

namespace k = kernels;

// ---- host bf16 / f16 ----

uint16_t bf16_bits(float f) {  // round to nearest even, as __float2bfloat16
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float round_bf16(float f) { return bf16_to_f32(bf16_bits(f)); }

float f16_value(uint16_t h) {  // IEEE half to float (exact)
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31) v = mant ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(mant + 1024), exp - 25);
  return sign ? -v : v;
}

std::vector<uint16_t> random_bf16(size_t n, uint32_t seed, float mean = 0.0f, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = bf16_bits(dist(rng));
  return v;
}

// ---- device buffers ----

k::bf16* bf(uint16_t* p) { return reinterpret_cast<k::bf16*>(p); }
const k::bf16* cbf(const uint16_t* p) { return reinterpret_cast<const k::bf16*>(p); }

// |got - want| <= rel * scale + abs, reported with its index.
void expect_close(const std::vector<uint16_t>& got, const std::vector<double>& want, const std::vector<double>& scale,
                  double rel, double abs, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 10; ++i) {
    const double g = bf16_to_f32(got[i]);
    if (!(std::fabs(g - want[i]) <= rel * scale[i] + abs)) {
      ADD_FAILURE() << what << " [" << i << "]: got " << g << ", want " << want[i];
      ++failures;
    }
  }
}

// The rounding points are right when almost every value is bit-identical to the bf16 reference (the
// fp32 vs double sum moves only values within ~1e-7 of a rounding boundary).
void expect_mostly_exact(const std::vector<uint16_t>& got, const std::vector<double>& want, const char* what) {
  size_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) differ += bf16_to_f32(got[i]) != want[i];
  EXPECT_LE(differ, got.size() / 100) << what << ": " << differ << " of " << got.size() << " not bit-exact";
}

std::vector<double> abs_of(const std::vector<double>& v) {
  std::vector<double> a(v.size());
  for (size_t i = 0; i < v.size(); ++i) a[i] = std::fabs(v[i]);
  return a;
}

// ---- embedding / gather_rows ----

TEST(ElementwiseKernels, EmbeddingAndGatherRowsCopyRowsExactly) {
  PAGODA_SKIP_WITHOUT_GPU();
  for (const int cols : {64, 96, 100, 172, 2048, 4096}) {
    const int vocab = 37, n = 11;
    const auto table = random_bf16(static_cast<size_t>(vocab) * cols, 1 + cols);
    std::vector<int32_t> ids(n);
    for (int i = 0; i < n; ++i) ids[i] = (i * 7 + 3) % vocab;
    ids[0] = 0;
    ids[1] = vocab - 1;
    DeviceArray<uint16_t> d_table(table), d_out(static_cast<size_t>(n) * cols);
    DeviceArray<int32_t> d_ids(ids);

    std::vector<uint16_t> want(static_cast<size_t>(n) * cols);
    for (int i = 0; i < n; ++i)
      std::copy_n(table.begin() + static_cast<int64_t>(ids[i]) * cols, cols, want.begin() + int64_t{i} * cols);

    k::embedding(bf(d_out.get()), d_ids.get(), cbf(d_table.get()), n, cols, nullptr);
    EXPECT_EQ(d_out.download(), want) << "embedding, hidden " << cols;

    PAGODA_CUDA_CHECK(cudaMemset(d_out.get(), 0, static_cast<size_t>(n) * cols * 2));
    k::gather_rows(bf(d_out.get()), cbf(d_table.get()), d_ids.get(), n, cols, nullptr);
    EXPECT_EQ(d_out.download(), want) << "gather_rows, row " << cols;
  }
}

// ---- RMSNorm ----

// transformers' LlamaRMSNorm in bf16: bf16(bf16(x * rsqrt(mean(x^2) + eps)) * w).
std::vector<double> rms_norm_ref(const std::vector<uint16_t>& x, const std::vector<uint16_t>& w, int rows, int hidden,
                                 float eps) {
  std::vector<double> out(x.size());
  for (int r = 0; r < rows; ++r) {
    const uint16_t* xr = x.data() + int64_t{r} * hidden;
    double ss = 0;
    for (int i = 0; i < hidden; ++i) ss += double{bf16_to_f32(xr[i])} * bf16_to_f32(xr[i]);
    const double inv = 1.0 / std::sqrt(ss / hidden + eps);
    for (int i = 0; i < hidden; ++i) {
      const float normed = round_bf16(static_cast<float>(bf16_to_f32(xr[i]) * inv));
      out[int64_t{r} * hidden + i] = round_bf16(normed * bf16_to_f32(w[i]));
    }
  }
  return out;
}

TEST(ElementwiseKernels, RmsNormMatchesBf16Reference) {
  PAGODA_SKIP_WITHOUT_GPU();
  const float eps = 1e-5f;
  for (const int hidden : {64, 96, 172, 2048, 4096, 8192}) {
    const int rows = 5;
    const auto x = random_bf16(static_cast<size_t>(rows) * hidden, 10 + hidden, 0.0f, 2.0f);
    const auto w = random_bf16(hidden, 20 + hidden, 1.0f, 0.2f);
    DeviceArray<uint16_t> d_x(x), d_w(w), d_out(x.size());
    k::rms_norm(bf(d_out.get()), cbf(d_x.get()), cbf(d_w.get()), rows, hidden, eps, nullptr);
    const auto want = rms_norm_ref(x, w, rows, hidden, eps);
    // At worst a bf16 step on the normalised value (fp32 vs double sum) and one on the product.
    const auto got = d_out.download();
    expect_close(got, want, abs_of(want), 1.6e-2, 1e-6, "rms_norm");
    expect_mostly_exact(got, want, "rms_norm");
  }
}

TEST(ElementwiseKernels, AddRmsNormStoresRoundedResidualAndNormalisesIt) {
  PAGODA_SKIP_WITHOUT_GPU();
  const float eps = 1e-6f;
  for (const int hidden : {64, 96, 172, 2048, 4096, 8192}) {
    const int rows = 4;
    const size_t n = static_cast<size_t>(rows) * hidden;
    const auto residual = random_bf16(n, 30 + hidden);
    const auto x = random_bf16(n, 40 + hidden, 0.0f, 0.5f);
    const auto w = random_bf16(hidden, 50 + hidden, 1.0f, 0.2f);
    DeviceArray<uint16_t> d_res(residual), d_x(x), d_w(w), d_out(n);
    k::add_rms_norm(bf(d_res.get()), cbf(d_x.get()), bf(d_out.get()), cbf(d_w.get()), rows, hidden, eps, nullptr);

    std::vector<uint16_t> summed(n);  // fp32 add of two bf16, rounded once: bit-exact on both sides
    for (size_t i = 0; i < n; ++i) summed[i] = bf16_bits(bf16_to_f32(residual[i]) + bf16_to_f32(x[i]));
    EXPECT_EQ(d_res.download(), summed) << "residual, hidden " << hidden;
    const auto want = rms_norm_ref(summed, w, rows, hidden, eps);
    const auto got = d_out.download();
    expect_close(got, want, abs_of(want), 1.6e-2, 1e-6, "add_rms_norm");
    expect_mostly_exact(got, want, "add_rms_norm");
  }
}

// An act-order linear's input (kernels::gather_columns): out[r, j] = x[r, columns[j]] exactly, for rows of a multiple
// of 8 columns (a thread 8 of them, one 16-byte store) and of others (column by column), 1 to 70,000 rows (more
// than a grid's 65,535 in y).
TEST(ElementwiseKernels, GatherColumnsPermutesEveryRow) {
  PAGODA_SKIP_WITHOUT_GPU();
  for (const int cols : {4096, 1040, 172, 13, 8}) {  // 70,000 rows for 13 and 8: both paths past grid.y's limit
    for (const int rows : {1, 33, cols < 100 ? 70000 : 2}) {
      SCOPED_TRACE(::testing::Message() << "cols " << cols << " rows " << rows);
      std::vector<int32_t> order(cols);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), std::mt19937(cols + rows));
      const auto x = random_bf16(static_cast<size_t>(rows) * cols, 90 + cols);
      DeviceArray<int32_t> d_order(order);
      DeviceArray<uint16_t> d_x(x), d_out(x.size());
      k::gather_columns(bf(d_out.get()), cbf(d_x.get()), d_order.get(), rows, cols, nullptr);
      std::vector<uint16_t> want(x.size());
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < cols; ++j)
          want[static_cast<size_t>(r) * cols + j] = x[static_cast<size_t>(r) * cols + order[j]];
      EXPECT_EQ(d_out.download(), want);
    }
  }
}

// A norm that feeds an act-order linear writes its output in the linear's input order (Weight::output_order): out[r,
// j] is the plain launch's out[r, order[j]], bit for bit, and the residual is unchanged by the order. Row lengths of
// the one-vector-a-thread path (2,048, 4,096), the looped one (8,192) and the unvectorised one (172).
TEST(ElementwiseKernels, NormsWriteTheirOutputInAGivenColumnOrder) {
  PAGODA_SKIP_WITHOUT_GPU();
  for (const int hidden : {172, 2048, 4096, 8192}) {
    SCOPED_TRACE(hidden);
    const int rows = 3;
    const size_t n = static_cast<size_t>(rows) * hidden;
    std::vector<int32_t> order(hidden);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(hidden));
    const auto residual = random_bf16(n, 60 + hidden);
    const auto x = random_bf16(n, 70 + hidden, 0.0f, 0.5f);
    const auto w = random_bf16(hidden, 80 + hidden, 1.0f, 0.2f);
    DeviceArray<int32_t> d_order(order);
    DeviceArray<uint16_t> d_x(x), d_w(w), d_plain(n), d_ordered(n);
    auto expect_in_order = [&](const std::vector<uint16_t>& plain, const std::vector<uint16_t>& ordered) {
      std::vector<uint16_t> want(n);
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < hidden; ++j)
          want[static_cast<size_t>(r) * hidden + j] = plain[static_cast<size_t>(r) * hidden + order[j]];
      EXPECT_EQ(ordered, want);
    };
    k::rms_norm(bf(d_plain.get()), cbf(d_x.get()), cbf(d_w.get()), rows, hidden, 1e-5f, nullptr);
    k::rms_norm(bf(d_ordered.get()), cbf(d_x.get()), cbf(d_w.get()), rows, hidden, 1e-5f, nullptr, {}, d_order.get());
    expect_in_order(d_plain.download(), d_ordered.download());

    DeviceArray<uint16_t> d_res_plain(residual), d_res_ordered(residual);
    k::add_rms_norm(bf(d_res_plain.get()), cbf(d_x.get()), bf(d_plain.get()), cbf(d_w.get()), rows, hidden, 1e-5f,
                    nullptr);
    k::add_rms_norm(bf(d_res_ordered.get()), cbf(d_x.get()), bf(d_ordered.get()), cbf(d_w.get()), rows, hidden, 1e-5f,
                    nullptr, {}, {}, d_order.get());
    EXPECT_EQ(d_res_ordered.download(), d_res_plain.download());
    expect_in_order(d_plain.download(), d_ordered.download());
  }
}

// ---- RoPE ----

std::vector<float> inv_freq_for(int head_dim, double theta = 500000.0) {
  std::vector<float> f(head_dim / 2);
  for (int i = 0; i < head_dim / 2; ++i) f[i] = static_cast<float>(std::pow(theta, -2.0 * i / head_dim));
  return f;
}

// Rotate-half RoPE of one head in double; the angle is the fp32 product (the contract), its cos/sin exact.
// out/scale: the rotated values and |x0| + |x1| (times scaling) of each, the bound on their magnitude.
void rope_head_ref(const uint16_t* head, int head_dim, int32_t pos, const std::vector<float>& inv_freq, float scaling,
                   double* out, double* scale) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    const double c = std::cos(static_cast<double>(angle)) * scaling;
    const double s = std::sin(static_cast<double>(angle)) * scaling;
    const double x0 = bf16_to_f32(head[i]), x1 = bf16_to_f32(head[i + half]);
    out[i] = x0 * c - x1 * s;
    out[i + half] = x1 * c + x0 * s;
    scale[i] = scale[i + half] = (std::fabs(x0) + std::fabs(x1)) * scaling;
  }
}

std::vector<int32_t> test_positions(int n) {
  std::vector<int32_t> p(n);
  const int32_t large[] = {131071, 100000, 65537, 0};
  for (int i = 0; i < n; ++i) p[i] = i < 4 ? large[i] : (i * 997) % 4096;
  return p;
}

// bf16 rounding of the fp32 result is at most 2^-8 of |result| <= (|x0| + |x1|) * scaling.
constexpr double kRopeRel = 5e-3;

TEST(ElementwiseKernels, RopeMatchesDoubleReferenceAtLargePositions) {
  PAGODA_SKIP_WITHOUT_GPU();
  for (const int hd : {8, 16, 64, 128}) {
    for (const float scaling : {1.0f, 1.25f}) {
      const int T = 7, nh = 4, nkv = 2;
      const auto q = random_bf16(static_cast<size_t>(T) * nh * hd, 60 + hd);
      const auto kk = random_bf16(static_cast<size_t>(T) * nkv * hd, 70 + hd);
      const auto positions = test_positions(T);
      const auto inv_freq = inv_freq_for(hd);
      DeviceArray<uint16_t> d_q(q), d_k(kk);
      DeviceArray<int32_t> d_pos(positions);
      DeviceArray<float> d_inv(inv_freq);
      k::rope(bf(d_q.get()), bf(d_k.get()), d_pos.get(), d_inv.get(), scaling, T, nh, nkv, hd, nullptr);

      for (int which = 0; which < 2; ++which) {
        const auto& src = which == 0 ? q : kk;
        const int heads = which == 0 ? nh : nkv;
        std::vector<double> want(src.size()), scale(src.size());
        for (int t = 0; t < T; ++t) {
          for (int h = 0; h < heads; ++h) {
            const int64_t off = (int64_t{t} * heads + h) * hd;
            rope_head_ref(src.data() + off, hd, positions[t], inv_freq, scaling, want.data() + off, scale.data() + off);
          }
        }
        expect_close((which == 0 ? d_q : d_k).download(), want, scale, kRopeRel, 1e-6,
                     which == 0 ? "rope q" : "rope k");
      }
    }
  }
}

// ---- KV store ----

// Distinct cache slots for T tokens, shuffled, token `pad` marked -1 (padding).
std::vector<int32_t> shuffled_slots(int num_tokens, int num_slots, int pad, uint32_t seed) {
  std::vector<int32_t> all(num_slots);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), std::mt19937(seed));
  std::vector<int32_t> slots(all.begin(), all.begin() + num_tokens);
  slots[pad] = -1;
  return slots;
}

constexpr uint16_t kSentinel = 0x7f7f;  // cudaMemset(0x7f) fills: rows never written keep it

TEST(ElementwiseKernels, StoreKvWritesShuffledSlotsAndSkipsPadding) {
  PAGODA_SKIP_WITHOUT_GPU();
  struct Shape { int nkv, hd; };
  for (const Shape s : {Shape{8, 128}, Shape{2, 8}, Shape{3, 12}, Shape{1, 64}}) {
    const int T = 10, num_blocks = 4, block_size = 16, num_slots = num_blocks * block_size;
    const int row = s.nkv * s.hd;
    const auto kk = random_bf16(static_cast<size_t>(T) * row, 80 + row);
    const auto v = random_bf16(static_cast<size_t>(T) * row, 90 + row);
    const auto slots = shuffled_slots(T, num_slots, 3, row);
    DeviceArray<uint16_t> d_k(kk), d_v(v);
    DeviceArray<uint16_t> kc(static_cast<size_t>(num_slots) * row), vc(static_cast<size_t>(num_slots) * row);
    DeviceArray<int32_t> d_slots(slots);
    PAGODA_CUDA_CHECK(cudaMemset(kc.get(), 0x7f, static_cast<size_t>(num_slots) * row * 2));
    PAGODA_CUDA_CHECK(cudaMemset(vc.get(), 0x7f, static_cast<size_t>(num_slots) * row * 2));
    k::store_kv(bf(kc.get()), bf(vc.get()), cbf(d_k.get()), cbf(d_v.get()), d_slots.get(), T, s.nkv, s.hd, nullptr);

    std::vector<uint16_t> want_k(static_cast<size_t>(num_slots) * row, kSentinel), want_v = want_k;
    for (int t = 0; t < T; ++t) {
      if (slots[t] < 0) continue;
      std::copy_n(kk.begin() + int64_t{t} * row, row, want_k.begin() + int64_t{slots[t]} * row);
      std::copy_n(v.begin() + int64_t{t} * row, row, want_v.begin() + int64_t{slots[t]} * row);
    }
    EXPECT_EQ(kc.download(), want_k) << "k cache, nkv " << s.nkv << " hd " << s.hd;
    EXPECT_EQ(vc.download(), want_v) << "v cache, nkv " << s.nkv << " hd " << s.hd;
  }
}

// qkv [T, heads, hd] with the first `rotated` heads of every token reordered into RoPE pairs (element i
// at 2i, element i + hd/2 at 2i + 1): the layout of the CUDA backend's fused QKV weight.
std::vector<uint16_t> to_rope_pairs(const std::vector<uint16_t>& qkv, int heads, int rotated, int hd) {
  std::vector<uint16_t> out(qkv);
  for (size_t head = 0; head < qkv.size() / hd; ++head) {
    if (static_cast<int>(head % heads) >= rotated) continue;
    for (int i = 0; i < hd / 2; ++i) {
      out[head * hd + 2 * i] = qkv[head * hd + i];
      out[head * hd + 2 * i + 1] = qkv[head * hd + hd / 2 + i];
    }
  }
  return out;
}

// Also 1,100 tokens of 12 heads: the launch's blocks then take several heads each in turn (qkv_rope_grid).
TEST(ElementwiseKernels, QkvRopeStoreRotatesQAndKAndCachesKV) {
  PAGODA_SKIP_WITHOUT_GPU();
  struct Shape {
    int T, nh, nkv;
  };
  for (const Shape shape : {Shape{6, 4, 2}, Shape{1100, 8, 2}})
  for (const int hd : {8, 16, 64, 128, 256}) {
    const int T = shape.T, nh = shape.nh, nkv = shape.nkv, num_slots = (T / 16 + 3) * 16, pad = 2;
    const float scaling = 1.1f;
    const int heads = nh + 2 * nkv, row = nkv * hd;
    const auto qkv = random_bf16(static_cast<size_t>(T) * heads * hd, 100 + hd);
    const auto positions = test_positions(T);
    const auto slots = shuffled_slots(T, num_slots, pad, 7 * hd);
    const auto inv_freq = inv_freq_for(hd);
    DeviceArray<uint16_t> d_qkv(to_rope_pairs(qkv, heads, nh + nkv, hd)), q_out(static_cast<size_t>(T) * nh * hd);
    DeviceArray<uint16_t> kc(static_cast<size_t>(num_slots) * row), vc(static_cast<size_t>(num_slots) * row);
    DeviceArray<int32_t> d_pos(positions), d_slots(slots);
    DeviceArray<float> d_inv(inv_freq);
    PAGODA_CUDA_CHECK(cudaMemset(kc.get(), 0x7f, static_cast<size_t>(num_slots) * row * 2));
    PAGODA_CUDA_CHECK(cudaMemset(vc.get(), 0x7f, static_cast<size_t>(num_slots) * row * 2));
    k::qkv_rope_store(bf(q_out.get()), cbf(d_qkv.get()), bf(kc.get()), bf(vc.get()), d_pos.get(), d_slots.get(),
                      d_inv.get(), scaling, T, nh, nkv, hd, nullptr);

    std::vector<double> want_q(static_cast<size_t>(T) * nh * hd), scale_q(want_q.size());
    std::vector<double> k_rot(static_cast<size_t>(row)), k_scale(k_rot.size());
    const auto got_k = kc.download(), got_v = vc.download();
    std::vector<bool> written(num_slots, false);
    for (int t = 0; t < T; ++t) {
      const uint16_t* tok = qkv.data() + int64_t{t} * heads * hd;
      for (int h = 0; h < nh; ++h) {
        const int64_t off = (int64_t{t} * nh + h) * hd;
        rope_head_ref(tok + int64_t{h} * hd, hd, positions[t], inv_freq, scaling, want_q.data() + off,
                      scale_q.data() + off);
      }
      if (slots[t] < 0) continue;  // the padding token: q only
      written[slots[t]] = true;
      for (int h = 0; h < nkv; ++h)
        rope_head_ref(tok + int64_t{nh + h} * hd, hd, positions[t], inv_freq, scaling, k_rot.data() + h * hd,
                      k_scale.data() + h * hd);
      const std::vector<uint16_t> k_row(got_k.begin() + int64_t{slots[t]} * row,
                                        got_k.begin() + int64_t{slots[t] + 1} * row);
      expect_close(k_row, k_rot, k_scale, kRopeRel, 1e-6, "k cache");
      const std::vector<uint16_t> v_row(got_v.begin() + int64_t{slots[t]} * row,
                                        got_v.begin() + int64_t{slots[t] + 1} * row);
      const std::vector<uint16_t> v_want(tok + int64_t{nh + nkv} * hd, tok + int64_t{nh + 2 * nkv} * hd);
      EXPECT_EQ(v_row, v_want) << "v cache, token " << t << " of " << T << " hd " << hd;
    }
    expect_close(q_out.download(), want_q, scale_q, kRopeRel, 1e-6, "q_out");
    for (int s = 0; s < num_slots; ++s) {
      if (written[s]) continue;
      for (int e = 0; e < row; ++e) {
        ASSERT_EQ(got_k[int64_t{s} * row + e], kSentinel) << "k slot " << s << " written";
        ASSERT_EQ(got_v[int64_t{s} * row + e], kSentinel) << "v slot " << s << " written";
      }
    }
  }
}

// ---- SiLU ----

double silu_mul_ref(double g, double u) { return g / (1.0 + std::exp(-g)) * u; }

TEST(ElementwiseKernels, SiluMulMatchesReference) {
  PAGODA_SKIP_WITHOUT_GPU();
  for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{1000}, int64_t{3 * 4096 + 5}}) {
    for (const int offset : {0, 1}) {  // offset 1: misaligned pointers, the scalar path
      const auto gate = random_bf16(n + offset, 110 + n, 0.0f, 3.0f);
      const auto up = random_bf16(n + offset, 120 + n);
      DeviceArray<uint16_t> d_g(gate), d_u(up), d_out(n + offset);
      k::silu_mul(bf(d_out.get()) + offset, cbf(d_g.get()) + offset, cbf(d_u.get()) + offset, n, nullptr);
      const auto got = d_out.download();
      std::vector<uint16_t> got_n(got.begin() + offset, got.end());
      std::vector<double> want(n);
      for (int64_t i = 0; i < n; ++i) want[i] = silu_mul_ref(bf16_to_f32(gate[i + offset]), bf16_to_f32(up[i + offset]));
      expect_close(got_n, want, abs_of(want), 5e-3, 1e-7, "silu_mul");
    }
  }
}

TEST(ElementwiseKernels, SiluMulInterleavedPairsGateAndUp) {
  PAGODA_SKIP_WITHOUT_GPU();
  for (const int inter : {172, 173, 256, 8192, 14336}) {  // 173: not a multiple of 4, the scalar path
    const int rows = 3;
    const auto gate_up = random_bf16(static_cast<size_t>(rows) * 2 * inter, 130 + inter, 0.0f, 3.0f);
    DeviceArray<uint16_t> d_gu(gate_up), d_out(static_cast<size_t>(rows) * inter);
    k::silu_mul_interleaved(bf(d_out.get()), cbf(d_gu.get()), rows, inter, nullptr);
    std::vector<double> want(static_cast<size_t>(rows) * inter);
    for (int r = 0; r < rows; ++r) {
      for (int i = 0; i < inter; ++i) {
        const uint16_t* g = gate_up.data() + int64_t{r} * 2 * inter;
        want[int64_t{r} * inter + i] = silu_mul_ref(bf16_to_f32(g[2 * i]), bf16_to_f32(g[2 * i + 1]));
      }
    }
    expect_close(d_out.download(), want, abs_of(want), 5e-3, 1e-7, "silu_mul_interleaved");
  }
}

// ---- conversions ----

TEST(ElementwiseKernels, Bf16ToF32IsExactForEveryPattern) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::vector<uint16_t> all(65536 + 8);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  DeviceArray<uint16_t> d_in(all);
  DeviceArray<float> d_out(all.size());
  for (const int offset : {0, 1}) {
    const int64_t n = static_cast<int64_t>(all.size()) - offset;
    k::bf16_to_f32(d_out.get() + offset, cbf(d_in.get()) + offset, n, nullptr);
    const auto got = d_out.download();
    for (int64_t i = offset; i < n + offset; ++i) {
      const float want = bf16_to_f32(all[i]);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got[i])) << i;
      } else {
        ASSERT_EQ(std::memcmp(&got[i], &want, 4), 0) << "pattern " << all[i] << " offset " << offset;
      }
    }
  }
}

TEST(ElementwiseKernels, F32ToBf16RoundsToNearestEven) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::vector<float> in = {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, 3.0e38f, 1e-40f, -1e-42f, 65504.0f};
  std::mt19937 rng(5);
  for (int i = 0; i < 5000; ++i) {  // random bits over every exponent, and exact ties
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    in.push_back(f);
    u = (u & 0xffff0000u) | 0x8000u;  // halfway between two bf16: ties to even
    std::memcpy(&f, &u, 4);
    if (!std::isnan(f)) in.push_back(f);
  }
  DeviceArray<float> d_in(in);
  DeviceArray<uint16_t> d_out(in.size());
  for (const int offset : {0, 3}) {
    const int64_t n = static_cast<int64_t>(in.size()) - offset;
    k::f32_to_bf16(bf(d_out.get()) + offset, d_in.get() + offset, n, nullptr);
    const auto got = d_out.download();
    for (int64_t i = offset; i < n + offset; ++i)
      ASSERT_EQ(got[i], bf16_bits(in[i])) << "value " << in[i] << " offset " << offset;
  }
}

TEST(ElementwiseKernels, F16ToBf16RoundsEveryPattern) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  DeviceArray<uint16_t> d_in(all), d_out(all.size());
  for (const int offset : {0, 1}) {
    const int64_t n = static_cast<int64_t>(all.size()) - offset;
    k::f16_to_bf16(bf(d_out.get()) + offset, reinterpret_cast<const __half*>(d_in.get()) + offset, n, nullptr);
    const auto got = d_out.download();
    for (int64_t i = offset; i < n + offset; ++i) {
      const float v = f16_value(all[i]);
      if (std::isnan(v)) {
        ASSERT_TRUE(std::isnan(bf16_to_f32(got[i]))) << i;
      } else {
        ASSERT_EQ(got[i], bf16_bits(v)) << "half pattern " << all[i] << " offset " << offset;
      }
    }
  }
}

// ---- fill_random ----

TEST(ElementwiseKernels, FillRandomIsSeededNormalAndPathIndependent) {
  PAGODA_SKIP_WITHOUT_GPU();
  const int64_t n = (int64_t{1} << 22) + 3;
  const float stddev = 0.02f;
  DeviceArray<uint16_t> a(n + 1), b(n + 1);
  k::fill_random(bf(a.get()), n, 1234, stddev, 0.0f, nullptr);
  const auto first = a.download();

  double sum = 0, sum2 = 0;
  int64_t beyond_2sigma = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = bf16_to_f32(first[i]);
    ASSERT_TRUE(std::isfinite(v)) << i;
    sum += v;
    sum2 += v * v;
    beyond_2sigma += std::fabs(v) > 2 * stddev;
  }
  const double mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
  EXPECT_LT(std::fabs(mean), 6 * stddev / std::sqrt(double(n))) << "mean " << mean;
  EXPECT_NEAR(sd, stddev, 0.01 * stddev);
  EXPECT_NEAR(double(beyond_2sigma) / n, 0.0455, 0.003);  // two-sided normal tail mass beyond 2 sigma

  k::fill_random(bf(b.get()), n, 1234, stddev, 0.0f, nullptr);  // same seed: the same bits
  EXPECT_EQ(b.download(), first);

  k::fill_random(bf(b.get()), n, 1235, stddev, 0.0f, nullptr);  // another seed: other values
  const auto other = b.download();
  int64_t same = 0;
  for (int64_t i = 0; i < n; ++i) same += other[i] == first[i];
  EXPECT_LT(same, n / 20);

  // A misaligned start takes the scalar path; value i must still depend on (seed, i) alone.
  k::fill_random(bf(b.get()) + 1, n, 1234, stddev, 0.0f, nullptr);
  const auto shifted = b.download();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(shifted[i + 1], first[i]) << i;

  k::fill_random(bf(b.get()), n, 9, 0.0f, 1.5f, nullptr);  // stddev 0: the constant
  const auto constant = b.download();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(constant[i], bf16_bits(1.5f)) << i;
}

// ---- empty launches ----

TEST(ElementwiseKernels, EmptyShapesLaunchNothing) {
  PAGODA_SKIP_WITHOUT_GPU();
  k::embedding(nullptr, nullptr, nullptr, 0, 4096, nullptr);
  k::gather_rows(nullptr, nullptr, nullptr, 0, 4096, nullptr);
  k::rms_norm(nullptr, nullptr, nullptr, 0, 4096, 1e-5f, nullptr);
  k::add_rms_norm(nullptr, nullptr, nullptr, nullptr, 0, 4096, 1e-5f, nullptr);
  k::rope(nullptr, nullptr, nullptr, nullptr, 1.0f, 0, 32, 8, 128, nullptr);
  k::store_kv(nullptr, nullptr, nullptr, nullptr, nullptr, 0, 8, 128, nullptr);
  k::qkv_rope_store(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1.0f, 0, 32, 8, 128, nullptr);
  k::silu_mul(nullptr, nullptr, nullptr, 0, nullptr);
  k::silu_mul_interleaved(nullptr, nullptr, 0, 14336, nullptr);
  k::bf16_to_f32(nullptr, nullptr, 0, nullptr);
  k::f32_to_bf16(nullptr, nullptr, 0, nullptr);
  k::f16_to_bf16(nullptr, nullptr, 0, nullptr);
  k::fill_random(nullptr, 0, 1, 1.0f, 0.0f, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace pagoda
