// Where a batch-1 decode step of Llama-3-8B spends its GPU time: each kernel the step launches, at the
// step's shapes, captured 100 times into a CUDA graph and replayed, so launch gaps count as they do in the
// engine's own decode graphs. Prints microseconds per launch and per step (x 32 layers): a measurement,
// run only with PAGODA_PROFILE=1 (scripts/device/run.sh). The profile behind docs/PERFORMANCE.md's decode
// breakdown.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/elementwise.h"
#include "pagoda/kernels/gemv.h"
#include "pagoda/kernels/paged_attention.h"

namespace pagoda {
namespace {

namespace k = kernels;
using k::bf16;

struct DeviceBytes {
  explicit DeviceBytes(size_t n) { PAGODA_CUDA_CHECK(cudaMalloc(&p, n)); PAGODA_CUDA_CHECK(cudaMemset(p, 0, n)); }
  ~DeviceBytes() { cudaFree(p); }
  template <typename T>
  T* as() const { return static_cast<T*>(p); }
  void* p = nullptr;
};

// Microseconds per call of `launch` when 100 calls replay from one graph (after a warm-up replay).
double graph_us(cudaStream_t stream, const std::function<void()>& launch) {
  constexpr int kCalls = 100;
  cudaGraph_t graph;
  PAGODA_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kCalls; ++i) launch();
  PAGODA_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  PAGODA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  PAGODA_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  cudaEvent_t a, b;
  PAGODA_CUDA_CHECK(cudaEventCreate(&a));
  PAGODA_CUDA_CHECK(cudaEventCreate(&b));
  PAGODA_CUDA_CHECK(cudaEventRecord(a, stream));
  for (int r = 0; r < 5; ++r) PAGODA_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  PAGODA_CUDA_CHECK(cudaEventRecord(b, stream));
  PAGODA_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  PAGODA_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return 1000.0 * ms / (5 * kCalls);
}

TEST(DecodeStepProfile, Llama3_8B_Batch1) {
  PAGODA_SKIP_WITHOUT_GPU();
  PAGODA_SKIP_UNLESS_PROFILING();
  constexpr int H = 4096, nh = 32, nkv = 8, hd = 128, I = 14336, V = 128256, layers = 32, bs = 16;
  cudaStream_t s;
  PAGODA_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // Weights of 4 layers, cycled, so that every GEMM streams from HBM as in the real step.
  constexpr int kCopies = 4;
  const size_t qkv_w = size_t{nh + 2 * nkv} * hd * H, o_w = size_t{H} * nh * hd, gu_w = size_t{2} * I * H,
               down_w = size_t{H} * I;
  DeviceBytes w(2 * kCopies * (qkv_w + o_w + gu_w + down_w)), lm(2 * size_t{V} * H);
  k::fill_random(w.as<bf16>(), static_cast<int64_t>(kCopies * (qkv_w + o_w + gu_w + down_w)), 1, 0.02f, 0, s);
  DeviceBytes x(2 * I * 2 * 8), y(2 * I * 2 * 8), res(2 * H * 8), norm_w(2 * H),
      q(2 * nh * hd * 8), attn(2 * nh * hd * 8), logits(2 * size_t{V} * 8);
  k::fill_random(norm_w.as<bf16>(), H, 0, 0, 1.0f, s);
  const int blocks = 4096 / bs + 8;
  DeviceBytes kc(2 * size_t{blocks} * bs * nkv * hd), vc(2 * size_t{blocks} * bs * nkv * hd);
  std::vector<float> inv_freq(hd / 2);
  for (int i = 0; i < hd / 2; ++i) inv_freq[i] = std::pow(500000.0f, -2.0f * i / hd);
  DeviceBytes freq(sizeof(float) * hd / 2), meta(4 * 1024 * 4);
  PAGODA_CUDA_CHECK(cudaMemcpy(freq.p, inv_freq.data(), sizeof(float) * hd / 2, cudaMemcpyHostToDevice));

  int copy = 0;
  auto weight = [&](size_t offset) {  // the cycled copy of a layer's weight at `offset` in a layer
    return w.as<bf16>() + (copy % kCopies) * (qkv_w + o_w + gu_w + down_w) + offset;
  };
  struct Row { const char* name; double us; int per_step; };
  std::vector<Row> rows;
  auto add = [&](const char* name, int per_step, const std::function<void()>& f) {
    rows.push_back({name, graph_us(s, [&] { f(); ++copy; }), per_step});
  };
  add("add_rms_norm", 2 * layers, [&] { k::add_rms_norm(res.as<bf16>(), y.as<bf16>(), x.as<bf16>(), norm_w.as<bf16>(), 1, H, 1e-5f, s); });
  // Position and slot of the token (pos 100, slot 100), for RoPE and the KV store.
  std::vector<int32_t> m(4 * 1024, 0);
  m[0] = 100;                                  // positions[0]
  m[1] = 100;                                  // slot_mapping[0]
  m[2] = 0; m[3] = 1;                          // query_start
  m[4] = 0; m[5] = 0;                          // kv_page_start (set below)
  for (int i = 0; i < blocks; ++i) m[64 + i] = i;  // kv_pages
  m[8] = 0;                                    // token_seq
  auto run_attention = [&](int ctx) {
    m[6] = ctx;                                // seq_lens[0]
    m[5] = (ctx + bs - 1) / bs;
    PAGODA_CUDA_CHECK(cudaMemcpy(meta.p, m.data(), m.size() * 4, cudaMemcpyHostToDevice));
    const int32_t* d = meta.as<int32_t>();
    k::PagedAttentionParams p;
    p.out = attn.as<bf16>(); p.q = q.as<bf16>(); p.k_cache = kc.as<bf16>(); p.v_cache = vc.as<bf16>();
    p.query_start = d + 2; p.seq_lens = d + 6; p.kv_page_start = d + 4; p.kv_pages = d + 64; p.token_seq = d + 8;
    p.num_seqs = 1; p.num_tokens = 1; p.num_heads = nh; p.num_kv_heads = nkv; p.head_dim = hd; p.block_size = bs;
    p.max_query_len = 1; p.max_seq_len = ctx; p.scale = 0.088f;
    const int splits = k::decode_num_splits(4096);  // a graph captured for max_model_len 4096
    DeviceBytes ws(k::paged_attention_decode_workspace_bytes(1, nh, hd, splits));
    rows.push_back({ctx == 128 ? "attention decode ctx 128 (+merge)" : "attention decode ctx 2048 (+merge)",
                    graph_us(s, [&] { k::paged_attention_decode(p, splits, ws.p, s); }), layers});
  };
  add("gemm qkv 6144x4096 + rope + kv store", layers, [&] {
    const int32_t* d = meta.as<int32_t>();
    const k::QkvRopeOutput o{q.as<bf16>(), kc.as<bf16>(), vc.as<bf16>(), d, d + 1, freq.as<float>(), 1.0f, nh, nkv, hd};
    k::skinny_gemm_qkv_rope(o, x.as<bf16>(), weight(0), 1, H, s);
  });
  PAGODA_CUDA_CHECK(cudaMemcpy(meta.p, m.data(), m.size() * 4, cudaMemcpyHostToDevice));
  run_attention(128);
  run_attention(2048);
  add("gemm o 4096x4096", layers, [&] { k::skinny_gemm(y.as<bf16>(), attn.as<bf16>(), weight(qkv_w), 1, H, nh * hd, s); });
  add("gemm gate_up 28672x4096 + silu", layers, [&] { k::skinny_gemm_silu(x.as<bf16>(), y.as<bf16>(), weight(qkv_w + o_w), 1, I, H, s); });
  add("gemm down 4096x14336", layers, [&] { k::skinny_gemm(x.as<bf16>(), y.as<bf16>(), weight(qkv_w + o_w + gu_w), 1, H, I, s); });
  add("gemm lm_head 128256x4096", 1, [&] { k::skinny_gemm(logits.as<bf16>(), x.as<bf16>(), lm.as<bf16>(), 1, V, H, s); });
  PAGODA_CUDA_CHECK(cudaStreamSynchronize(s));

  double step128 = 0, step2048 = 0;
  std::printf("[ profile ] %-36s %10s %6s %12s\n", "kernel (batch 1)", "us/launch", "x", "us/step");
  for (const Row& r : rows) {
    std::printf("[ profile ] %-36s %10.2f %6d %12.1f\n", r.name, r.us, r.per_step, r.us * r.per_step);
    const bool a128 = std::string(r.name).find("ctx 128") != std::string::npos;
    const bool a2048 = std::string(r.name).find("ctx 2048") != std::string::npos;
    if (!a2048) step128 += r.us * r.per_step;
    if (!a128) step2048 += r.us * r.per_step;
  }
  std::printf("[ profile ] sum per step: %.1f us at context 128, %.1f us at 2048 (embedding, gathers and final norm "
              "not counted)\n", step128, step2048);
  for (const Row& r : rows) EXPECT_GT(r.us, 0.0) << r.name;
  cudaStreamDestroy(s);
}


// Decode attention alone, bf16 KV against FP8 KV, at the shapes of docs/PERFORMANCE.md's FP8 KV table
// (Llama-3-8B heads: 32 query, 8 KV, head_dim 128; block size 16; shuffled block tables): batch 1 at 8k and
// 32k context and 64 sequences at 4k, each with the split count the engine's graphs use for its
// max_model_len. Layers are cycled over copies of the cache so that no launch reads from L2 what the last
// one left. Prints microseconds per launch (kernel and merge), the KV bytes read per second, and the
// FP8 / bf16 speed ratio. A measurement, run only with PAGODA_PROFILE=1.
TEST(DecodeStepProfile, AttentionBf16VsFp8Kv) {
  PAGODA_SKIP_WITHOUT_GPU();
  PAGODA_SKIP_UNLESS_PROFILING();
  constexpr int nh = 32, nkv = 8, hd = 128, bs = 16;
  struct Case { const char* name; int batch, ctx, max_model_len; };
  const Case cases[] = {{"b1 ctx 128", 1, 128, 4096},    {"b1 ctx 2048", 1, 2048, 4096},
                        {"b1 ctx 8000", 1, 8000, 8448},  {"b1 ctx 32000", 1, 32000, 32768},
                        {"b64 ctx 4096", 64, 4096, 4352}, {"b256 ctx 1024", 256, 1024, 4096},
                        // Graphs captured for Llama-3.1's 131,072-token context, replayed at shorter ones.
                        {"b1 2048 of 128k", 1, 2048, 131072}, {"b1 8000 of 128k", 1, 8000, 131072},
                        {"b1 32000 of 128k", 1, 32000, 131072}};
  cudaStream_t s;
  PAGODA_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::printf("[ profile ] %-16s %12s %10s %12s %10s %8s\n", "attention", "bf16 us", "bf16 GB/s", "fp8 us", "fp8 GB/s",
              "fp8 x");
  const char* only = std::getenv("PAGODA_PROFILE_CASE");  // e.g. "ctx 32000": that case alone (for ncu)
  for (const Case& c : cases) {
    if (only != nullptr && std::string(c.name).find(only) == std::string::npos) continue;
    const int blocks_per_seq = (c.ctx + bs - 1) / bs;
    const int64_t used_blocks = static_cast<int64_t>(c.batch) * blocks_per_seq;
    const size_t row_elems = size_t{bs} * nkv * hd;  // one block of one cache
    const size_t layer_bytes_bf16 = 2 * used_blocks * row_elems * 2;
    const int copies = std::max<int>(2, static_cast<int>((256ull << 20) / layer_bytes_bf16));  // >= 256 MB cycled
    const int64_t nblocks = used_blocks * copies;
    DeviceBytes kc(2 * nblocks * row_elems), vc(2 * nblocks * row_elems);
    DeviceBytes k8(nblocks * row_elems), v8(nblocks * row_elems), ke(nblocks * bs * nkv), ve(nblocks * bs * nkv);
    k::fill_random(kc.as<bf16>(), static_cast<int64_t>(nblocks * row_elems), 11, 1.0f, 0, s);
    k::fill_random(vc.as<bf16>(), static_cast<int64_t>(nblocks * row_elems), 12, 1.0f, 0, s);
    {  // FP8 codes without NaNs (exponent field below 15) and exponents in [-8, -4]
      std::vector<uint8_t> codes(nblocks * row_elems), exps(nblocks * bs * nkv);
      uint64_t x = 0x9e3779b97f4a7c15ull;
      auto next = [&] { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x; };
      for (size_t i = 0; i + 8 <= codes.size(); i += 8) {
        const uint64_t r = next() & 0xF7F7F7F7F7F7F7F7ull;
        std::memcpy(codes.data() + i, &r, 8);
      }
      for (auto& e : exps) e = static_cast<uint8_t>(-4 - static_cast<int>(next() % 5));
      PAGODA_CUDA_CHECK(cudaMemcpy(k8.p, codes.data(), codes.size(), cudaMemcpyHostToDevice));
      std::reverse(codes.begin(), codes.end());
      PAGODA_CUDA_CHECK(cudaMemcpy(v8.p, codes.data(), codes.size(), cudaMemcpyHostToDevice));
      PAGODA_CUDA_CHECK(cudaMemcpy(ke.p, exps.data(), exps.size(), cudaMemcpyHostToDevice));
      PAGODA_CUDA_CHECK(cudaMemcpy(ve.p, exps.data(), exps.size(), cudaMemcpyHostToDevice));
    }
    // Metadata: query_start, seq_lens, kv_page_start, token_seq; then per copy a shuffled block table.
    std::vector<int32_t> qs(c.batch + 1), lens(c.batch, c.ctx), starts(c.batch + 1), tok(c.batch);
    for (int i = 0; i <= c.batch; ++i) qs[i] = i, starts[i] = i * blocks_per_seq;
    for (int i = 0; i < c.batch; ++i) tok[i] = i;
    std::vector<int32_t> pages(nblocks);
    std::iota(pages.begin(), pages.end(), 0);
    std::mt19937 rng(7);
    std::shuffle(pages.begin(), pages.end(), rng);
    test::DeviceArray<int32_t> d_qs(qs), d_lens(lens), d_starts(starts), d_tok(tok), d_pages(pages);
    DeviceBytes q(2 * static_cast<size_t>(c.batch) * nh * hd), out(2 * static_cast<size_t>(c.batch) * nh * hd);
    k::fill_random(q.as<bf16>(), int64_t{c.batch} * nh * hd, 13, 1.0f, 0, s);
    const int splits = k::decode_num_splits(c.max_model_len);
    DeviceBytes ws(k::paged_attention_decode_workspace_bytes(c.batch, nh, hd, splits));
    double us[2] = {0, 0};
    for (int fp8 = 0; fp8 < 2; ++fp8) {
      int copy = 0;
      us[fp8] = graph_us(s, [&] {
        k::PagedAttentionParams p;
        p.out = out.as<bf16>(); p.q = q.as<bf16>(); p.k_cache = kc.as<bf16>(); p.v_cache = vc.as<bf16>();
        if (fp8) { p.k_fp8 = k8.as<uint8_t>(); p.v_fp8 = v8.as<uint8_t>(); p.k_exp = ke.as<int8_t>(); p.v_exp = ve.as<int8_t>(); }
        p.query_start = d_qs.get(); p.seq_lens = d_lens.get(); p.kv_page_start = d_starts.get();
        p.kv_pages = d_pages.get() + (copy++ % copies) * used_blocks; p.token_seq = d_tok.get();
        p.num_seqs = c.batch; p.num_tokens = c.batch; p.num_heads = nh; p.num_kv_heads = nkv; p.head_dim = hd;
        p.block_size = bs; p.max_query_len = 1; p.max_seq_len = c.ctx; p.scale = 0.088f;
        k::paged_attention_decode(p, splits, ws.p, s);
      });
    }
    const double kv_bf16 = 2.0 * c.batch * c.ctx * nkv * hd * 2, kv_fp8 = 2.0 * c.batch * c.ctx * nkv * (hd + 1);
    std::printf("[ profile ] %-16s %12.2f %10.0f %12.2f %10.0f %8.2f\n", c.name, us[0], kv_bf16 / us[0] / 1e3, us[1],
                kv_fp8 / us[1] / 1e3, us[0] / us[1]);
    EXPECT_GT(us[0], 0.0);
    EXPECT_GT(us[1], 0.0);
  }
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace pagoda
