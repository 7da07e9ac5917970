// Zero rows through every Ops method, and a model step that needs no logits. A prompt longer than the
// step's token budget is computed in chunks, and a chunk that does not end its prompt samples nothing:
// that step has no logits rows, so the final norm and lm_head see zero rows. Included by the CPU
// backend's tests and by the GPU tests, one TEST per backend.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "../model/golden_helpers.h"
#include "pagoda/backend/ops.h"
#include "pagoda/model/rope.h"

namespace pagoda::testing {

// The batch's arrays copied to the backend (the model's ops read them there).
inline ForwardBatch upload_batch(Ops& ops, const ForwardBatch& host) {
  ForwardBatch b = host;
  for (Tensor* t : {&b.token_ids, &b.positions, &b.query_start, &b.token_seq, &b.seq_lens, &b.kv_page_start,
                    &b.kv_pages, &b.slot_mapping, &b.logits_rows, &b.token_from_prev_sample})
    *t = ops.upload(*t);
  return b;
}

// Every op on zero tokens (or zero gathered rows) returns without touching memory and without error.
inline void expect_every_op_accepts_zero_rows(Ops& ops, const LoadedModel& m) {
  const ModelConfig& c = m.config;
  const ModelWeights w = ops.prepare_weights(m.weights, c, false);
  LlamaModel model(c, w);
  KvCache cache = ops.allocate_kv_cache(model.kv_cache_spec(4, 16, ops.activation_dtype()));
  const RopeParams rope = make_rope_params(c.rope, c.head_dim);
  const DType act = ops.activation_dtype();
  const int64_t H = c.hidden_size, nh = c.num_heads, nkv = c.num_kv_heads, hd = c.head_dim,
                I = c.intermediate_size, V = c.vocab_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const LayerWeights& l0 = w.layers[0];
  BatchBuilder builder;
  ops.reset_workspace();
  const ForwardBatch batch = upload_batch(ops, builder.build({}, 16));
  ASSERT_EQ(batch.num_tokens, 0);

  Tensor x = ops.alloc(act, {0, H}), out = ops.alloc(act, {0, H}), residual = ops.alloc(act, {0, H});
  Tensor q = ops.alloc(act, {0, nh, hd}), k = ops.alloc(act, {0, nkv, hd}), v = ops.alloc(act, {0, nkv, hd});
  Tensor attn = ops.alloc(act, {0, nh, hd}), gate = ops.alloc(act, {0, I}), up = ops.alloc(act, {0, I});
  Tensor logits = ops.alloc(act, {0, V});
  ops.embedding(out, batch.token_ids, w.embed_tokens);
  ops.rms_norm(out, x, l0.attn_norm, eps);
  ops.add_rms_norm(residual, x, out, l0.ffn_norm, eps);
  ops.linear(logits, x, w.lm_head);  // [0, H] x [V, H]^T: the call that aborted on CUDA
  ops.linear(x, attn.reshape({0, nh * hd}), l0.wo);
  ops.linear(x, gate, l0.w_down);
  if (!l0.wqkv.data.empty()) {  // the backend fused its projections
    ops.qkv_rope_store(q, x, l0.wqkv, cache, 0, batch, rope);
    ops.gate_up_silu(gate, x, l0.w_gate_up);
  } else {
    ops.linear(q.reshape({0, nh * hd}), x, l0.wq);
    ops.linear(k.reshape({0, nkv * hd}), x, l0.wk);
    ops.linear(v.reshape({0, nkv * hd}), x, l0.wv);
    ops.linear(gate, x, l0.w_gate);
    ops.linear(up, x, l0.w_up);
  }
  ops.rope(q, k, batch.positions, rope);
  ops.store_kv(cache, 0, k, v, batch);
  ops.attention(attn, q, cache, 0, batch, 0.125f);
  ops.silu_mul(gate, gate, up);
  Tensor three = ops.alloc(act, {3, H});
  ops.gather_rows(out, three, batch.logits_rows);  // no rows out of three
  ops.gather_rows(out, x, batch.logits_rows);      // no rows out of none
  std::vector<float> none;
  ops.download_f32(Tensor(none.data(), DType::kF32, {0, V}), logits);
  // Anything the calls above queued has run: a launch error would surface in this download.
  std::vector<float> host(static_cast<size_t>(3 * H));
  ops.download_f32(Tensor(host.data(), DType::kF32, {3, H}), three);
  ops.free_kv_cache(cache);
}

// A 40-token prompt in two steps: tokens 0-23 sample nothing (the step has no logits rows, and returns
// [0, vocab]), tokens 24-39 give the last position's logits. They match the CPU's for the whole prompt
// in one step within `tolerance` of the logit range.
inline void expect_a_step_without_logits_rows_feeds_the_next(Ops& ops, const LoadedModel& m, double tolerance) {
  const ModelConfig& c = m.config;
  std::vector<TokenId> ids{1};
  for (int i = 1; i < 40; ++i) ids.push_back(static_cast<TokenId>(3 + (i * 37) % (c.vocab_size - 3)));
  const std::vector<int32_t> blocks = {2, 0, 3};  // 48 slots, not in order
  const int64_t V = c.vocab_size;

  auto last_row = [&](Ops& backend, const ModelWeights& weights, std::initializer_list<int> splits) {
    LlamaModel model(c, weights);
    KvCache cache = backend.allocate_kv_cache(model.kv_cache_spec(4, 16, backend.activation_dtype()));
    BatchBuilder builder;
    std::vector<float> row(static_cast<size_t>(V));
    int start = 0;
    for (int end : splits) {
      const bool last = end == static_cast<int>(ids.size());
      const SequenceChunk chunk{std::span(ids).subspan(start, end - start), start, blocks,
                                last ? LogitsWanted::kLast : LogitsWanted::kNone};
      const Tensor logits = backend.run_step(builder.build(std::span(&chunk, 1), 16), [&](const ForwardBatch& b) {
        return model.forward(backend, b, cache);
      });
      EXPECT_EQ(logits.dim(0), last ? 1 : 0) << "step ending at token " << end;
      EXPECT_EQ(logits.dim(1), V);
      if (last) backend.download_f32(Tensor(row.data(), DType::kF32, {1, V}), logits);
      start = end;
    }
    backend.free_kv_cache(cache);
    return row;
  };
  CpuOps cpu;
  const std::vector<float> ref = last_row(cpu, m.weights, {40});
  const std::vector<float> got = last_row(ops, ops.prepare_weights(m.weights, c, false), {24, 40});
  const auto [lo, hi] = std::minmax_element(ref.begin(), ref.end());
  double worst = 0;
  for (int64_t i = 0; i < V; ++i) worst = std::max(worst, static_cast<double>(std::abs(got[i] - ref[i])));
  EXPECT_LE(worst, tolerance * (*hi - *lo)) << "logit range " << *hi - *lo;
}

}  // namespace pagoda::testing
