// The CPU backend's fused ops (Ops::qkv_rope_store, Ops::gate_up_silu) against the separate ops they
// stand for, with stacked weights ([Wq; Wk; Wv], [W_gate; W_up]). The CPU model never fuses its weights,
// so these are the reference forms of the interface; each output must equal the separate ops' exactly:
// the same per-row dot products and the same elementwise formulas.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "pagoda/backend/cpu/cpu_ops.h"
#include "pagoda/runner/batch_builder.h"
#include "random_values.h"

namespace pagoda {
namespace {

using test::random_values;

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.ptr<float>(), t.ptr<float>() + t.numel()); }

TEST(CpuFusedOps, GateUpSiluEqualsSeparateProjectionsAndSiluMul) {
  CpuOps ops;
  const int64_t T = 3, H = 40, I = 24;
  std::vector<float> x = random_values(T * H, 1), gate_up = random_values(2 * I * H, 2);
  const Tensor xt(x.data(), DType::kF32, {T, H});
  const Weight w_gate_up{Tensor(gate_up.data(), DType::kF32, {2 * I, H})};
  const Weight w_gate{w_gate_up.data.rows(0, I)}, w_up{w_gate_up.data.rows(I, I)};

  Tensor fused = ops.alloc(DType::kF32, {T, I}), gate = ops.alloc(DType::kF32, {T, I}), up = ops.alloc(DType::kF32, {T, I});
  ops.gate_up_silu(fused, xt, w_gate_up);
  ops.linear(gate, xt, w_gate);
  ops.linear(up, xt, w_up);
  ops.silu_mul(gate, gate, up);
  EXPECT_EQ(values(fused), values(gate));
}

TEST(CpuFusedOps, QkvRopeStoreEqualsSeparateProjectionsRopeAndStore) {
  const int64_t T = 5, H = 32, nh = 4, nkv = 2, hd = 8;
  const int block_size = 4;
  std::vector<float> x = random_values(T * H, 3), wqkv = random_values((nh + 2 * nkv) * hd * H, 4);
  const Tensor xt(x.data(), DType::kF32, {T, H});
  const Weight w{Tensor(wqkv.data(), DType::kF32, {(nh + 2 * nkv) * hd, H})};
  const Weight wq{w.data.rows(0, nh * hd)}, wk{w.data.rows(nh * hd, nkv * hd)}, wv{w.data.rows((nh + nkv) * hd, nkv * hd)};
  RopeParams rope;
  for (int i = 0; i < hd / 2; ++i) rope.inv_freq.push_back(std::pow(10000.0f, -2.0f * i / hd));
  rope.attention_scaling = 1.25f;

  // Two sequences: three prompt tokens at positions 4..6 (blocks 2, 0), and two at 0..1 (block 1).
  const std::vector<TokenId> a = {1, 2, 3}, b = {4, 5};
  const std::vector<int32_t> table_a = {2, 0}, table_b = {1};
  const SequenceChunk chunks[] = {{a, 4, table_a, LogitsWanted::kLast}, {b, 0, table_b, LogitsWanted::kLast}};
  BatchBuilder builder;
  const ForwardBatch& batch = builder.build(chunks, block_size);
  ASSERT_EQ(batch.num_tokens, T);

  const KvCacheSpec spec{.num_layers = 1, .num_blocks = 3, .block_size = block_size, .num_kv_heads = nkv,
                         .head_dim = hd, .dtype = DType::kF32};
  CpuOps fused_ops, separate_ops;
  KvCache fused_cache = fused_ops.allocate_kv_cache(spec), separate_cache = separate_ops.allocate_kv_cache(spec);
  for (KvCache* c : {&fused_cache, &separate_cache}) {
    std::fill_n(c->k[0].ptr<float>(), c->k[0].numel(), -7.0f);
    std::fill_n(c->v[0].ptr<float>(), c->v[0].numel(), -7.0f);
  }

  Tensor q_fused = fused_ops.alloc(DType::kF32, {T, nh, hd});
  fused_ops.qkv_rope_store(q_fused, xt, w, fused_cache, 0, batch, rope);

  Tensor q = separate_ops.alloc(DType::kF32, {T, nh, hd}), k = separate_ops.alloc(DType::kF32, {T, nkv, hd}),
         v = separate_ops.alloc(DType::kF32, {T, nkv, hd});
  separate_ops.linear(q.reshape({T, nh * hd}), xt, wq);
  separate_ops.linear(k.reshape({T, nkv * hd}), xt, wk);
  separate_ops.linear(v.reshape({T, nkv * hd}), xt, wv);
  separate_ops.rope(q, k, batch.positions, rope);
  separate_ops.store_kv(separate_cache, 0, k, v, batch);

  EXPECT_EQ(values(q_fused), values(q));
  EXPECT_EQ(values(fused_cache.k[0]), values(separate_cache.k[0]));
  EXPECT_EQ(values(fused_cache.v[0]), values(separate_cache.v[0]));
  // Every token's slot was written (no -7 left in the 5 slots the batch uses).
  int written = 0;
  for (float e : values(fused_cache.v[0])) written += e != -7.0f;
  EXPECT_EQ(written, T * nkv * hd);
  fused_ops.free_kv_cache(fused_cache);
  separate_ops.free_kv_cache(separate_cache);
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

// --threads: OpenMP's thread count is per calling thread, and the engine runs its steps on a thread of its own,
// which does not inherit the constructor's setting; each step (reset_workspace) applies it there.
TEST(CpuOpsThreads, TheThreadCountHoldsOnTheThreadThatRunsTheSteps) {
  const int wanted = omp_get_num_procs() + 3;  // never OpenMP's default, which a new thread starts with
  CpuOps ops(CpuOpsOptions{.num_threads = wanted});
  int before = -1, after = -1;
  std::thread engine([&] {
    before = omp_get_max_threads();
    ops.reset_workspace();
    after = omp_get_max_threads();
  });
  engine.join();
  EXPECT_NE(before, wanted) << "a new thread inherits nothing (the reason for the fix)";
  EXPECT_EQ(after, wanted);
}

}  // namespace
}  // namespace pagoda
