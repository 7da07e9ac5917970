// GPU paged attention (kernels/paged_attention_*.cu) against a double-precision host reference computed
// from the same bf16-rounded inputs. Prefill over a grid of head dims x GQA shapes x block sizes (prompts,
// chunks after a prior context, single tokens, padding), a mixed step of 171 sequences, other head dims
// (generic kernel); decode with split-K (the needed split count and more, as a captured graph passes),
// one split, wide batches, a CUDA graph replayed after the sequence lengths change in device memory, and what
// decode reads before its PDL wait (Q and the last keys written late by the kernel before it).
// Block tables are shuffled, and every cache slot outside a sequence holds NaN, so a read of a wrong
// page or of a key past the end shows up as NaN. Tolerance: 2e-2 absolute + 2e-2 relative (bf16 output).
// Every test runs over a bf16 and an FP8 cache (kv/kv_fp8.h; the suites' parameter): with FP8 the
// reference reads the values the codes hold, and the FP8 kernels must give the bf16 kernels' outputs over
// those values: bit for bit in prefill; in decode, which sums each 16-dim step of Q K^T in another order
// (paged_attention_common.cuh), within one bf16 ulp, and equal in almost every element.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "late_writes.h"
#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/paged_attention.h"
#include "pagoda/kv/kv_fp8.h"

namespace pagoda {
namespace {

using test::DeviceArray;

using kernels::PagedAttentionParams;

constexpr uint16_t kBf16NaN = 0x7fc0;
constexpr double kAbsTol = 2e-2;
constexpr double kRelTol = 2e-2;

struct Shape {
  int num_heads, num_kv_heads, head_dim, block_size;
};
struct Seq {
  int seq_len, q_len;  // KV length after the step; new tokens (the last q_len positions)
};

std::string describe(const Shape& s) {
  return "heads " + std::to_string(s.num_heads) + "/" + std::to_string(s.num_kv_heads) + ", head_dim " +
         std::to_string(s.head_dim) + ", block_size " + std::to_string(s.block_size);
}

// One batch on the host: bf16 tensors as raw bits, block tables in CSR form.
struct Batch {
  Shape shape{};
  int num_seqs = 0, num_tokens = 0, num_blocks = 0, max_query_len = 0, max_seq_len = 0;
  std::vector<uint16_t> q;  // [num_tokens, num_heads, head_dim]
  std::vector<uint16_t> k;  // [num_blocks, block_size, num_kv_heads, head_dim]
  std::vector<uint16_t> v;  // [num_blocks, block_size, num_kv_heads, head_dim]
  std::vector<int32_t> query_start, seq_lens, kv_page_start, kv_pages, token_seq;
  // FP8 KV: the cache the kernels read (k and v then hold the values it represents).
  bool fp8 = false;
  std::vector<uint8_t> k8, v8;  // codes, as k and v
  std::vector<int8_t> ke, ve;   // exponents [num_blocks, num_kv_heads, block_size]
};

// With `fp8`, quantizes every owned row of b.k / b.v (kv_fp8.h) and writes back the values it holds;
// unowned rows get NaN codes (0x7F) and arbitrary exponents.
void quantize_cache(Batch& b, const std::vector<bool>& owned_slot) {
  const int bs = b.shape.block_size, hd = b.shape.head_dim, nkv = b.shape.num_kv_heads;
  const size_t rows = static_cast<size_t>(b.num_blocks) * bs * nkv;
  b.fp8 = true;
  b.k8.assign(rows * hd, 0x7F);
  b.v8.assign(rows * hd, 0x7F);
  b.ke.assign(rows, 0);
  b.ve.assign(rows, 0);
  std::mt19937 rng(static_cast<uint32_t>(rows));
  for (auto* e : {&b.ke, &b.ve})
    for (int8_t& x : *e) x = static_cast<int8_t>(static_cast<int>(rng() % 9) - 4);
  std::vector<float> row(hd), back(hd);
  for (size_t r = 0; r < rows; ++r) {
    const int64_t slot = static_cast<int64_t>(r) / nkv;
    if (!owned_slot[slot]) continue;
    const size_t e = (slot / bs * nkv + static_cast<int64_t>(r) % nkv) * bs + slot % bs;
    for (int kv = 0; kv < 2; ++kv) {
      std::vector<uint16_t>& vals = kv == 0 ? b.k : b.v;
      std::vector<uint8_t>& codes = kv == 0 ? b.k8 : b.v8;
      int8_t& exponent = (kv == 0 ? b.ke : b.ve)[e];
      for (int d = 0; d < hd; ++d) row[d] = bf16_to_f32(vals[r * hd + d]);
      exponent = quantize_fp8_kv_row(row.data(), hd, codes.data() + r * hd);
      dequantize_fp8_kv_row(codes.data() + r * hd, exponent, hd, back.data());
      for (int d = 0; d < hd; ++d) {
        vals[r * hd + d] = f32_to_bf16(back[d]);
        EXPECT_EQ(bf16_to_f32(vals[r * hd + d]), back[d]) << "an FP8 KV value is not exact in bf16";
      }
    }
  }
}

// Random q/K/V (q and K in [-2, 2), V in [-1, 1)), each sequence's blocks drawn from a shuffled pool
// with a few spare blocks; slots no sequence owns are NaN. `fp8`: the cache quantized (quantize_cache).
Batch make_batch(const Shape& shape, const std::vector<Seq>& seqs, uint32_t seed, bool fp8) {
  std::mt19937 rng(seed);
  const auto uni = [&rng] { return static_cast<float>(rng() >> 8) * (2.0f / 16777216.0f) - 1.0f; };  // [-1, 1)
  Batch b;
  b.shape = shape;
  b.num_seqs = static_cast<int>(seqs.size());
  const int bs = shape.block_size, hd = shape.head_dim, nkv = shape.num_kv_heads;
  b.query_start.push_back(0);
  b.kv_page_start.push_back(0);
  int total_pages = 0;
  for (int s = 0; s < b.num_seqs; ++s) {
    b.query_start.push_back(b.query_start.back() + seqs[s].q_len);
    b.seq_lens.push_back(seqs[s].seq_len);
    total_pages += (seqs[s].seq_len + bs - 1) / bs;
    b.kv_page_start.push_back(total_pages);
    for (int i = 0; i < seqs[s].q_len; ++i) b.token_seq.push_back(s);
    b.max_query_len = std::max(b.max_query_len, seqs[s].q_len);
    b.max_seq_len = std::max(b.max_seq_len, seqs[s].seq_len);
  }
  b.num_tokens = b.query_start.back();
  b.num_blocks = total_pages + 5;
  std::vector<int32_t> pool(b.num_blocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  b.kv_pages.assign(pool.begin(), pool.begin() + total_pages);

  b.q.resize(static_cast<size_t>(b.num_tokens) * shape.num_heads * hd);
  for (auto& x : b.q) x = f32_to_bf16(2.0f * uni());
  const size_t cache_elems = static_cast<size_t>(b.num_blocks) * bs * nkv * hd;
  b.k.assign(cache_elems, kBf16NaN);
  b.v.assign(cache_elems, kBf16NaN);
  std::vector<bool> owned(static_cast<size_t>(b.num_blocks) * bs, false);
  for (int s = 0; s < b.num_seqs; ++s) {
    for (int key = 0; key < seqs[s].seq_len; ++key) {
      const int64_t slot = static_cast<int64_t>(b.kv_pages[b.kv_page_start[s] + key / bs]) * bs + key % bs;
      owned[slot] = true;
      for (int i = 0; i < nkv * hd; ++i) {
        b.k[slot * nkv * hd + i] = f32_to_bf16(2.0f * uni());
        b.v[slot * nkv * hd + i] = f32_to_bf16(uni());
      }
    }
  }
  if (fp8) quantize_cache(b, owned);
  return b;
}

// out[t, h, :] = softmax(scale * q . K[0..pos]) V[0..pos] in double; zero rows for padding sequences.
std::vector<double> reference(const Batch& b) {
  const Shape& sh = b.shape;
  const int hd = sh.head_dim, group = sh.num_heads / sh.num_kv_heads, bs = sh.block_size;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::vector<double> out(b.q.size(), 0.0);
  std::vector<double> w, qh(hd);
  for (int s = 0; s < b.num_seqs; ++s) {
    const int q_len = b.query_start[s + 1] - b.query_start[s], seq_len = b.seq_lens[s];
    std::vector<int64_t> row_of_key(seq_len);  // element offset of each key's slot
    for (int key = 0; key < seq_len; ++key) {
      row_of_key[key] =
          (static_cast<int64_t>(b.kv_pages[b.kv_page_start[s] + key / bs]) * bs + key % bs) * sh.num_kv_heads * hd;
    }
    for (int i = 0; i < q_len; ++i) {
      const int t = b.query_start[s] + i;
      const int num_keys = std::min(seq_len, seq_len - q_len + i + 1);
      for (int h = 0; h < sh.num_heads && num_keys > 0; ++h) {
        for (int d = 0; d < hd; ++d) qh[d] = bf16_to_f32(b.q[(static_cast<size_t>(t) * sh.num_heads + h) * hd + d]);
        const int64_t head_off = static_cast<int64_t>(h / group) * hd;
        w.assign(num_keys, 0.0);
        double mx = -INFINITY;
        for (int key = 0; key < num_keys; ++key) {
          const uint16_t* kr = &b.k[row_of_key[key] + head_off];
          double dot = 0.0;
          for (int d = 0; d < hd; ++d) dot += qh[d] * bf16_to_f32(kr[d]);
          w[key] = dot * scale;
          mx = std::max(mx, w[key]);
        }
        double sum = 0.0;
        for (double& x : w) sum += (x = std::exp(x - mx));
        double* o = &out[(static_cast<size_t>(t) * sh.num_heads + h) * hd];
        for (int key = 0; key < num_keys; ++key) {
          const uint16_t* vr = &b.v[row_of_key[key] + head_off];
          const double p = w[key] / sum;
          for (int d = 0; d < hd; ++d) o[d] += p * bf16_to_f32(vr[d]);
        }
      }
    }
  }
  return out;
}

// Device memory freed at scope exit.
class DeviceArena {
 public:
  ~DeviceArena() {
    for (void* p : ptrs_) cudaFree(p);
  }
  void* alloc(size_t bytes) {
    void* p = nullptr;
    PAGODA_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 16)));
    ptrs_.push_back(p);
    return p;
  }
  template <typename T>
  T* upload(const std::vector<T>& host) {
    T* p = static_cast<T*>(alloc(host.size() * sizeof(T)));
    if (!host.empty()) PAGODA_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
  }

 private:
  std::vector<void*> ptrs_;
};

// Uploads a batch; the output starts as all-ones bits (NaN) so that an unwritten row shows.
PagedAttentionParams upload_batch(DeviceArena& arena, const Batch& b) {
  PagedAttentionParams p;
  const size_t out_bytes = b.q.size() * sizeof(uint16_t);
  p.out = static_cast<__nv_bfloat16*>(arena.alloc(out_bytes));
  PAGODA_CUDA_CHECK(cudaMemset(p.out, 0xff, out_bytes));
  p.q = reinterpret_cast<const __nv_bfloat16*>(arena.upload(b.q));
  if (b.fp8) {
    p.k_cache = p.v_cache = nullptr;
    p.k_fp8 = arena.upload(b.k8);
    p.v_fp8 = arena.upload(b.v8);
    p.k_exp = arena.upload(b.ke);
    p.v_exp = arena.upload(b.ve);
  } else {
    p.k_cache = reinterpret_cast<const __nv_bfloat16*>(arena.upload(b.k));
    p.v_cache = reinterpret_cast<const __nv_bfloat16*>(arena.upload(b.v));
  }
  p.query_start = arena.upload(b.query_start);
  p.seq_lens = arena.upload(b.seq_lens);
  p.kv_page_start = arena.upload(b.kv_page_start);
  p.kv_pages = arena.upload(b.kv_pages);
  p.token_seq = arena.upload(b.token_seq);
  p.num_seqs = b.num_seqs;
  p.num_tokens = b.num_tokens;
  p.num_heads = b.shape.num_heads;
  p.num_kv_heads = b.shape.num_kv_heads;
  p.head_dim = b.shape.head_dim;
  p.block_size = b.shape.block_size;
  p.max_query_len = b.max_query_len;
  p.max_seq_len = b.max_seq_len;
  p.scale = 1.0f / std::sqrt(static_cast<float>(b.shape.head_dim));
  return p;
}

std::vector<uint16_t> download_out(const PagedAttentionParams& p, const Batch& b) {
  std::vector<uint16_t> out(b.q.size());
  PAGODA_CUDA_CHECK(cudaMemcpy(out.data(), p.out, out.size() * sizeof(uint16_t), cudaMemcpyDeviceToHost));
  return out;
}

// The same batch over the bf16 cache of the values an FP8 batch holds.
Batch as_bf16(const Batch& b) {
  Batch c = b;
  c.fp8 = false;
  return c;
}

// An FP8 batch's outputs are also checked against the bf16 kernels' over the same values: equal bits.
void expect_same_bits_as_bf16(const Batch& b, const std::vector<uint16_t>& got, const std::vector<uint16_t>& bf16_out,
                              const char* what) {
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != bf16_out[i] && differ++ == 0) first = i;
  EXPECT_EQ(differ, 0u) << what << " over FP8 KV differs from bf16 KV holding the same values at " << differ
                        << " elements, first " << first << " (" << describe(b.shape) << ")";
}

// Decode over FP8 KV against the bf16 kernel over the same values: its Q K^T adds each k-step's products
// in another order, so an output may round to the neighbouring bf16; never further, and rarely.
void expect_within_an_ulp_of_bf16(const Batch& b, const std::vector<uint16_t>& got,
                                  const std::vector<uint16_t>& bf16_out, const char* what) {
  size_t differ = 0, far = 0, first_far = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == bf16_out[i]) continue;
    ++differ;
    const double a = bf16_to_f32(got[i]), c = bf16_to_f32(bf16_out[i]);
    const bool near = std::isfinite(a) && std::isfinite(c) && std::abs(a - c) <= 0x1p-7 * std::max(std::abs(a), std::abs(c));
    if (!near && far++ == 0) first_far = i;
  }
  EXPECT_EQ(far, 0u) << what << " over FP8 KV is more than one bf16 ulp from bf16 KV holding the same values at "
                     << far << " elements, first " << first_far << " (" << describe(b.shape) << ")";
  EXPECT_LE(differ, got.size() / 100) << what << ": more than 1% of the elements differ from bf16 KV";
}

std::vector<uint16_t> run_prefill(const Batch& b) {
  DeviceArena arena;
  const PagedAttentionParams p = upload_batch(arena, b);
  kernels::paged_attention_prefill(p, nullptr);
  PAGODA_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint16_t> out = download_out(p, b);
  if (b.fp8) expect_same_bits_as_bf16(b, out, run_prefill(as_bf16(b)), "prefill");
  return out;
}

// `blocks_per_sm`: PagedAttentionParams::decode_blocks_per_sm (0: the dtype's own). An FP8 batch's bf16 twin runs
// over the FP8 grid's spans, so that the two add their spans' partials alike.
std::vector<uint16_t> run_decode(const Batch& b, int num_splits, int blocks_per_sm = 0) {
  DeviceArena arena;
  PagedAttentionParams p = upload_batch(arena, b);
  p.decode_blocks_per_sm = blocks_per_sm;
  void* ws = arena.alloc(
      kernels::paged_attention_decode_workspace_bytes(b.num_seqs, b.shape.num_heads, b.shape.head_dim, num_splits));
  kernels::paged_attention_decode(p, num_splits, ws, nullptr);
  PAGODA_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint16_t> out = download_out(p, b);
  if (b.fp8) {
    const int fp8_grid = blocks_per_sm > 0 ? blocks_per_sm : kernels::decode_blocks_wanted_per_sm(true);
    expect_within_an_ulp_of_bf16(b, out, run_decode(as_bf16(b), num_splits, fp8_grid), "decode");
  }
  return out;
}

// Every element within kAbsTol + kRelTol * |ref|; padding rows exactly zero.
struct Comparison {
  int64_t bad = 0;
  std::string first_bad;
  double max_err = 0.0;
};
Comparison compare(const Batch& b, const std::vector<uint16_t>& got, const std::vector<double>& ref) {
  const int hd = b.shape.head_dim, nh = b.shape.num_heads;
  Comparison c;
  for (int s = 0; s < b.num_seqs; ++s) {
    for (int t = b.query_start[s]; t < b.query_start[s + 1]; ++t) {
      for (int h = 0; h < nh; ++h) {
        for (int d = 0; d < hd; ++d) {
          const size_t i = (static_cast<size_t>(t) * nh + h) * hd + d;
          const double g = bf16_to_f32(got[i]);
          const bool ok = b.seq_lens[s] == 0 ? g == 0.0
                                              : std::abs(g - ref[i]) <= kAbsTol + kRelTol * std::abs(ref[i]);
          if (b.seq_lens[s] != 0 && std::isfinite(g)) c.max_err = std::max(c.max_err, std::abs(g - ref[i]));
          if (!ok && c.bad++ == 0) {
            c.first_bad = "seq " + std::to_string(s) + " (seq_len " + std::to_string(b.seq_lens[s]) + ", q_len " +
                          std::to_string(b.query_start[s + 1] - b.query_start[s]) + ") token " + std::to_string(t) +
                          " head " + std::to_string(h) + " dim " + std::to_string(d) + ": got " + std::to_string(g) +
                          ", want " + std::to_string(ref[i]);
          }
        }
      }
    }
  }
  return c;
}

// compare() finds no mismatch. Prints the max error.
void expect_matches(const Batch& b, const std::vector<uint16_t>& got, const std::vector<double>& ref,
                    const std::string& what) {
  const Comparison c = compare(b, got, ref);
  EXPECT_EQ(c.bad, 0) << what << ": first mismatch at " << c.first_bad;
  std::printf("  %-60s max abs error %.3g\n", what.c_str(), c.max_err);
}

// The 4 x 4 grid of head dims and GQA shapes; block sizes 16, 32, 1, 8 in a Latin square, so every
// head dim meets every block size once.
std::vector<Shape> shape_grid() {
  const int head_dims[] = {8, 16, 64, 128};
  const int gqa[][2] = {{32, 8}, {4, 2}, {8, 8}, {6, 2}};
  const int block_sizes[] = {16, 32, 1, 8};
  std::vector<Shape> shapes;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) shapes.push_back({gqa[j][0], gqa[j][1], head_dims[i], block_sizes[(i + j) % 4]});
  }
  return shapes;
}

// Prompts (q_len == seq_len), chunks after a prior context that is not a multiple of the 64-key tile,
// single tokens through the prefill kernel, several query tiles, and padding (seq_len 0).
const std::vector<Seq> kPrefillSeqs = {{1, 1},   {0, 1},    {150, 150}, {300, 77}, {129, 1},
                                       {64, 64}, {520, 40}, {100, 65},  {0, 2}};

// Decode contexts around the 512-key partition edges, up to 3 partitions, and padding.
const std::vector<Seq> kDecodeSeqs = {{1, 1},   {0, 1},    {17, 1},  {512, 1}, {513, 1},
                                      {1100, 1}, {777, 1}, {64, 1},  {1025, 1}};

// The parameter: FP8 KV (true) or bf16 KV.
class PagedAttentionPrefill : public ::testing::TestWithParam<bool> {};
class PagedAttentionDecode : public ::testing::TestWithParam<bool> {};
std::string kv_dtype_name(const ::testing::TestParamInfo<bool>& info) { return info.param ? "Fp8Kv" : "Bf16Kv"; }

TEST_P(PagedAttentionPrefill, MatchesReferenceOverShapes) {
  PAGODA_SKIP_WITHOUT_GPU();
  uint32_t seed = 1;
  for (const Shape& shape : shape_grid()) {
    const Batch b = make_batch(shape, kPrefillSeqs, seed++, GetParam());
    expect_matches(b, run_prefill(b), reference(b), "prefill " + describe(shape));
  }
}

TEST_P(PagedAttentionPrefill, OtherHeadDimsAndLargeGroups) {
  PAGODA_SKIP_WITHOUT_GPU();
  const std::vector<Seq> seqs = {{1, 1}, {0, 1}, {70, 70}, {90, 20}, {40, 1}, {200, 130}};
  const Shape shapes[] = {{4, 2, 2, 16}, {4, 2, 6, 8},    {4, 1, 32, 16},  {6, 3, 96, 16},
                          {4, 2, 256, 32}, {20, 1, 64, 16}, {36, 2, 128, 8}};
  uint32_t seed = 100;
  for (const Shape& shape : shapes) {
    const Batch b = make_batch(shape, seqs, seed++, GetParam());
    expect_matches(b, run_prefill(b), reference(b), "prefill " + describe(shape));
  }
}

// A mixed step: more than 128 sequences (the query-tile search takes several passes), most of them one
// decode token, some prompt chunks after a prior context, a whole prompt, padding.
std::vector<Seq> mixed_step_seqs() {
  std::mt19937 rng(9);
  std::vector<Seq> seqs;
  for (int i = 0; i < 170; ++i) {
    if (i % 50 == 7) {
      seqs.push_back({0, 1});
    } else if (i % 40 == 13) {
      seqs.push_back({static_cast<int>(40 + rng() % 220), 40});
    } else {
      seqs.push_back({static_cast<int>(1 + rng() % 200), 1});
    }
  }
  seqs.push_back({130, 130});
  return seqs;
}

TEST_P(PagedAttentionPrefill, MixedStepWithManySequences) {
  PAGODA_SKIP_WITHOUT_GPU();
  uint32_t seed = 150;
  for (const Shape& shape : {Shape{32, 8, 128, 16}, Shape{8, 2, 64, 8}, Shape{4, 2, 16, 16}}) {
    const Batch b = make_batch(shape, mixed_step_seqs(), seed++, GetParam());
    expect_matches(b, run_prefill(b), reference(b), "prefill, mixed step, " + describe(shape));
  }
}

TEST_P(PagedAttentionDecode, MatchesReferenceOverShapesWithNeededAndExtraSplits) {
  PAGODA_SKIP_WITHOUT_GPU();
  uint32_t seed = 200;
  for (const Shape& shape : shape_grid()) {
    const Batch b = make_batch(shape, kDecodeSeqs, seed++, GetParam());
    const int splits = kernels::decode_num_splits(b.max_seq_len);
    ASSERT_GE(splits, 3);  // several partitions, so the merge runs
    expect_matches(b, run_decode(b, splits), reference(b), "decode " + describe(shape));
    // A graph captured for longer contexts passes more splits: the partitions past the end do nothing.
    expect_matches(b, run_decode(b, splits + 5), reference(b), "decode, more splits, " + describe(shape));
  }
}

TEST_P(PagedAttentionDecode, SingleSplitWritesDirectly) {
  PAGODA_SKIP_WITHOUT_GPU();
  constexpr int P = kernels::kDecodePartitionTokens;  // every context within one partition
  const std::vector<Seq> seqs = {{1, 1}, {0, 1}, {P / 2 + 1, 1}, {P, 1}, {P * 3 / 5, 1}, {P - 1, 1}};
  const Shape shapes[] = {{32, 8, 128, 16}, {8, 8, 64, 32}, {6, 2, 64, 1}, {4, 2, 128, 8}};
  uint32_t seed = 300;
  for (const Shape& shape : shapes) {
    const Batch b = make_batch(shape, seqs, seed++, GetParam());
    ASSERT_EQ(kernels::decode_num_splits(b.max_seq_len), 1);
    const std::vector<double> ref = reference(b);
    expect_matches(b, run_decode(b, 1), ref, "decode, 1 split, " + describe(shape));
    expect_matches(b, run_decode(b, 2), ref, "decode, 2 splits, " + describe(shape));
  }
}

TEST_P(PagedAttentionDecode, LargeGroupsOtherHeadDimsAndManySequences) {
  PAGODA_SKIP_WITHOUT_GPU();
  const Shape shapes[] = {{20, 1, 64, 16}, {36, 2, 128, 8}, {4, 2, 2, 16},
                          {4, 2, 6, 8},    {6, 3, 96, 16},  {4, 2, 256, 32}};
  uint32_t seed = 400;
  for (const Shape& shape : shapes) {
    const Batch b = make_batch(shape, {{1, 1}, {0, 1}, {45, 1}, {600, 1}, {1030, 1}}, seed++, GetParam());
    expect_matches(b, run_decode(b, kernels::decode_num_splits(b.max_seq_len)), reference(b),
                   "decode " + describe(shape));
  }
  // A wide batch of short contexts (every tenth sequence padding).
  std::mt19937 rng(7);
  std::vector<Seq> many;
  for (int i = 0; i < 96; ++i) many.push_back({i % 10 == 0 ? 0 : static_cast<int>(1 + rng() % 300), 1});
  for (const Shape& shape : {Shape{32, 8, 128, 16}, Shape{8, 2, 64, 16}}) {
    const Batch b = make_batch(shape, many, seed++, GetParam());
    expect_matches(b, run_decode(b, kernels::decode_num_splits(b.max_seq_len)), reference(b),
                   "decode, 96 sequences, " + describe(shape));
  }
}

// A batch big enough that the launch merges partitions into longer spans per block (how many depends on
// the GPU's SM count), with the needed and with a graph-sized split count.
TEST_P(PagedAttentionDecode, WideBatchOfLongContexts) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(8);
  std::vector<Seq> seqs;
  for (int i = 0; i < 24; ++i) seqs.push_back({i % 7 == 3 ? 0 : static_cast<int>(1 + rng() % 1500), 1});
  uint32_t seed = 450;
  for (const Shape& shape : {Shape{32, 8, 128, 16}, Shape{8, 2, 64, 16}}) {
    const Batch b = make_batch(shape, seqs, seed++, GetParam());
    const std::vector<double> ref = reference(b);
    expect_matches(b, run_decode(b, kernels::decode_num_splits(b.max_seq_len)), ref, "decode " + describe(shape));
    const int graph_splits = kernels::decode_num_splits(2048);  // as captured for max_model_len 2048
    expect_matches(b, run_decode(b, graph_splits), ref, "decode, graph-sized splits, " + describe(shape));
  }
}

// Batch-1-like long contexts (Llama-3 heads, head_dim 128 and 64): dozens of spans per sequence, so the
// merge folds several batches of spans, with the split counts of graphs for 8k, 16k and 128k max_model_len
// (each sequence's span comes from its own length: a 128k graph spreads these over as many blocks as an 8k
// one), and one sequence alone.
TEST_P(PagedAttentionDecode, LongContextsMergeManySpans) {
  PAGODA_SKIP_WITHOUT_GPU();
  uint32_t seed = 470;
  for (const Shape& shape : {Shape{32, 8, 128, 16}, Shape{32, 8, 64, 16}}) {
    for (const std::vector<Seq>& seqs : {std::vector<Seq>{{8001, 1}, {3000, 1}, {0, 1}, {6500, 1}}, std::vector<Seq>{{8001, 1}},
                                         std::vector<Seq>{{700, 1}}}) {
      const Batch b = make_batch(shape, seqs, seed++, GetParam());
      const std::vector<double> ref = reference(b);
      for (const int max_model_len : {8048, 16384, 131072}) {
        expect_matches(b, run_decode(b, kernels::decode_num_splits(max_model_len)), ref,
                       "decode, " + std::to_string(seqs.size()) + " long contexts, graph for " +
                           std::to_string(max_model_len) + ", " + describe(shape));
      }
    }
  }
}

// The decode launch is captured once with the largest split count, then replayed after the sequence
// lengths and queries change in device memory (same pointers, new contents).
TEST_P(PagedAttentionDecode, GraphReplayReadsNewMetadata) {
  PAGODA_SKIP_WITHOUT_GPU();
  for (const Shape& shape : {Shape{8, 2, 128, 16}, Shape{4, 4, 64, 32}}) {
    // Blocks allocated for the longest contexts; the replays use shorter or equal lengths.
    Batch b = make_batch(shape, {{2048, 1}, {300, 1}, {600, 1}, {1500, 1}, {2048, 1}}, 500, GetParam());
    const int splits = kernels::decode_num_splits(2048);
    DeviceArena arena;
    PagedAttentionParams p = upload_batch(arena, b);
    void* ws = arena.alloc(
        kernels::paged_attention_decode_workspace_bytes(b.num_seqs, shape.num_heads, shape.head_dim, splits));
    cudaStream_t stream = nullptr;
    PAGODA_CUDA_CHECK(cudaStreamCreate(&stream));
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    PAGODA_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    kernels::paged_attention_decode(p, splits, ws, stream);
    PAGODA_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    PAGODA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));

    const std::vector<std::vector<int32_t>> lens = {{700, 0, 33, 1500, 2048}, {2048, 300, 1, 512, 513}};
    std::mt19937 rng(501);
    std::uniform_real_distribution<float> uni(-2.0f, 2.0f);
    for (size_t round = 0; round < lens.size(); ++round) {
      b.seq_lens = lens[round];
      for (auto& x : b.q) x = f32_to_bf16(uni(rng));
      PAGODA_CUDA_CHECK(cudaMemcpy(const_cast<int32_t*>(p.seq_lens), b.seq_lens.data(),
                                   b.seq_lens.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
      PAGODA_CUDA_CHECK(cudaMemcpy(const_cast<__nv_bfloat16*>(p.q), b.q.data(), b.q.size() * sizeof(uint16_t),
                                   cudaMemcpyHostToDevice));
      PAGODA_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream));
      expect_matches(b, download_out(p, b), reference(b),
                     "graph replay " + std::to_string(round) + ", " + describe(shape));
    }
    PAGODA_CUDA_CHECK(cudaGraphExecDestroy(exec));
    PAGODA_CUDA_CHECK(cudaGraphDestroy(graph));
    PAGODA_CUDA_CHECK(cudaStreamDestroy(stream));
  }
}

// What decode attention reads before its PDL wait. Its blocks load their first chunks before griddepcontrol.wait
// when those hold only keys before the sequence's last (paged_attention_decode.cu): in a step, the kernel just before
// attention (the QKV projection) writes Q and each sequence's last key, and earlier steps wrote the other keys.
// late_copies (late_writes.cu) plays that kernel here: it lets attention start at once and writes 200 us later; until
// then the buffers hold NaN (FP8: NaN codes and large exponents) where it will write.
enum class LateWrite { kQAndLastKeys, kEveryKey };
std::vector<uint16_t> run_decode_after_late_writes(const Batch& b, LateWrite what) {
  DeviceArena arena;
  const PagedAttentionParams p = upload_batch(arena, b);  // the true values
  Batch stale = b;
  std::fill(stale.q.begin(), stale.q.end(), kBf16NaN);
  const int bs = b.shape.block_size, nkv = b.shape.num_kv_heads, hd = b.shape.head_dim;
  for (int s = 0; s < b.num_seqs; ++s) {
    for (int key = what == LateWrite::kEveryKey ? 0 : b.seq_lens[s] - 1; key < b.seq_lens[s]; ++key) {
      const int64_t block = b.kv_pages[b.kv_page_start[s] + key / bs], slot = block * bs + key % bs;
      if (b.fp8) {
        std::fill_n(stale.k8.begin() + slot * nkv * hd, nkv * hd, uint8_t{0x7F});
        std::fill_n(stale.v8.begin() + slot * nkv * hd, nkv * hd, uint8_t{0x7F});
        for (int h = 0; h < nkv; ++h) {
          const int64_t e = (block * nkv + h) * bs + key % bs;  // exponents [num_blocks, nkv, block_size]
          stale.ke[e] = stale.ve[e] = 20;
        }
      } else {
        std::fill_n(stale.k.begin() + slot * nkv * hd, nkv * hd, kBf16NaN);
        std::fill_n(stale.v.begin() + slot * nkv * hd, nkv * hd, kBf16NaN);
      }
    }
  }
  // Each buffer the late kernel writes: the true values to a staging copy, the stale ones into the buffer.
  std::vector<test::LateCopy> copies;
  const auto stage = [&](const void* buffer, const auto& stale_host) {
    const size_t bytes = stale_host.size() * sizeof(stale_host[0]);
    void* staging = arena.alloc(bytes);
    PAGODA_CUDA_CHECK(cudaMemcpy(staging, buffer, bytes, cudaMemcpyDeviceToDevice));
    PAGODA_CUDA_CHECK(cudaMemcpy(const_cast<void*>(buffer), stale_host.data(), bytes, cudaMemcpyHostToDevice));
    copies.push_back({staging, const_cast<void*>(buffer), bytes});
  };
  stage(p.q, stale.q);
  if (b.fp8) {
    stage(p.k_fp8, stale.k8);
    stage(p.v_fp8, stale.v8);
    stage(p.k_exp, stale.ke);
    stage(p.v_exp, stale.ve);
  } else {
    stage(p.k_cache, stale.k);
    stage(p.v_cache, stale.v);
  }
  const int splits = kernels::decode_num_splits(b.max_seq_len);
  void* ws = arena.alloc(
      kernels::paged_attention_decode_workspace_bytes(b.num_seqs, b.shape.num_heads, b.shape.head_dim, splits));
  cudaStream_t stream = nullptr;
  PAGODA_CUDA_CHECK(cudaStreamCreate(&stream));
  test::launch_late_copies(copies, 200, stream);
  kernels::paged_attention_decode(p, splits, ws, stream);
  PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream));
  PAGODA_CUDA_CHECK(cudaStreamDestroy(stream));
  return download_out(p, b);
}

// Q and every last key written late: attention gives the reference's outputs. Then every key written late (which
// no step does): with PDL and the early loads on, attention reads NaN before its wait, which shows that the first
// check can fail. Lengths around the 64-key chunks' edges in one batch, and sequences alone (a lone sequence
// spreads over many spans, most of them with early chunks).
TEST_P(PagedAttentionDecode, ReadsOnlyEarlierStepsKeysBeforeThePdlWait) {
  PAGODA_SKIP_WITHOUT_GPU();
  const char* early_env = std::getenv("PAGODA_DECODE_EARLY_LOADS");
  const bool reads_early = test::library_uses_pdl() && !(early_env && std::string(early_env) == "0");
  const std::vector<std::vector<int>> batches = {
      {1, 2, 63, 64, 65, 127, 128, 129, 191, 192, 193, 700, 2048}, {8000}, {129}, {4097}};
  uint32_t seed = 600;
  for (const Shape& shape : {Shape{32, 8, 128, 16}, Shape{16, 4, 64, 32}}) {
    for (const std::vector<int>& lens : batches) {
      std::vector<Seq> seqs;
      for (int len : lens) seqs.push_back({len, 1});
      const Batch b = make_batch(shape, seqs, ++seed, GetParam());
      const std::vector<double> ref = reference(b);
      const std::string what = std::to_string(lens.size()) + " sequences up to " + std::to_string(b.max_seq_len) +
                               " keys, " + describe(shape);
      expect_matches(b, run_decode_after_late_writes(b, LateWrite::kQAndLastKeys), ref,
                     "late Q and last keys, " + what);
      if (reads_early && b.max_seq_len > kernels::kDecodePartitionTokens) {
        EXPECT_GT(compare(b, run_decode_after_late_writes(b, LateWrite::kEveryKey), ref).bad, 0)
            << "every key written late, " << what << ": attention read nothing before its wait";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KvDtypes, PagedAttentionPrefill, ::testing::Bool(), kv_dtype_name);
INSTANTIATE_TEST_SUITE_P(KvDtypes, PagedAttentionDecode, ::testing::Bool(), kv_dtype_name);

}  // namespace
}  // namespace pagoda
