// The Llama forward pass: embedding, then per layer
//   h = x + o_proj(attention(rope(q_proj(norm(x))), rope(k_proj(..)), v_proj(..)))
//   x = h + down_proj(silu(gate_proj(norm(h))) * up_proj(norm(h)))
// and a final norm + lm_head on the rows that are sampled.
#include "pagoda/model/llama_model.h"

#include <cmath>

#include "pagoda/model/rope.h"

namespace pagoda {

LlamaModel::LlamaModel(const ModelConfig& config, const ModelWeights& weights)
    : config_(config),
      weights_(weights),
      rope_(make_rope_params(config.rope, config.head_dim)),
      attn_scale_(1.0f / std::sqrt(static_cast<float>(config.head_dim))) {}

KvCacheSpec LlamaModel::kv_cache_spec(int num_blocks, int block_size, DType kv_dtype) const {
  KvCacheSpec spec;
  spec.num_layers = config_.num_layers;
  spec.num_blocks = num_blocks;
  spec.block_size = block_size;
  spec.num_kv_heads = config_.num_kv_heads;
  spec.head_dim = config_.head_dim;
  spec.dtype = kv_dtype;
  return spec;
}

Tensor LlamaModel::forward(Ops& ops, const ForwardBatch& batch, KvCache& cache) const {
  ops.reset_workspace();
  const DType act = ops.activation_dtype();
  const int64_t T = batch.num_tokens;
  const int64_t H = config_.hidden_size;
  const int64_t hd = config_.head_dim;
  const int64_t nh = config_.num_heads;
  const int64_t nkv = config_.num_kv_heads;
  const int64_t I = config_.intermediate_size;
  const float eps = static_cast<float>(config_.rms_norm_eps);

  Tensor residual = ops.alloc(act, {T, H});  // [T, H] the residual stream
  Tensor normed = ops.alloc(act, {T, H});    // [T, H]
  Tensor q = ops.alloc(act, {T, nh, hd});
  Tensor attn = ops.alloc(act, {T, nh, hd});
  Tensor proj = ops.alloc(act, {T, H});  // output of o_proj / down_proj, added into the residual
  // The backend either fused the projections (one GEMM each for QKV and gate-up: CUDA) or not (CPU).
  const bool fused = !weights_.layers.empty() && !weights_.layers[0].wqkv.data.empty();
  Tensor gate, up, k, v;
  if (fused) {
    gate = ops.alloc(act, {T, I});  // silu(gate) * up
  } else {
    k = ops.alloc(act, {T, nkv, hd});
    v = ops.alloc(act, {T, nkv, hd});
    gate = ops.alloc(act, {T, I});
    up = ops.alloc(act, {T, I});
  }

  ops.embedding(residual, batch.token_ids, weights_.embed_tokens);
  ops.rms_norm(normed, residual, weights_.layers[0].attn_norm, eps);
  for (int l = 0; l < config_.num_layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    if (fused) {
      ops.qkv_rope_store(q, normed, w.wqkv, cache, l, batch, rope_);
    } else {
      ops.linear(q.reshape({T, nh * hd}), normed, w.wq);
      ops.linear(k.reshape({T, nkv * hd}), normed, w.wk);
      ops.linear(v.reshape({T, nkv * hd}), normed, w.wv);
      ops.rope(q, k, batch.positions, rope_);
      ops.store_kv(cache, l, k, v, batch);
    }
    ops.attention(attn, q, cache, l, batch, attn_scale_);
    ops.linear_add_rms_norm(residual, proj, attn.reshape({T, nh * hd}), w.wo, normed, w.ffn_norm, eps,
                            fused ? &w.w_gate_up : nullptr);
    if (fused) {
      ops.gate_up_silu(gate, normed, w.w_gate_up);
    } else {
      ops.linear(gate, normed, w.w_gate);
      ops.linear(up, normed, w.w_up);
      ops.silu_mul(gate, gate, up);
    }
    if (l + 1 < config_.num_layers) {  // the next layer's attention norm (the last layer's proj is read below)
      ops.linear_add_rms_norm(residual, proj, gate, w.w_down, normed, weights_.layers[l + 1].attn_norm, eps,
                              fused ? &weights_.layers[l + 1].wqkv : nullptr);
    } else {
      ops.linear(proj, gate, w.w_down);
    }
  }

  // A step whose chunks all end before their prompt does (chunked prefill) samples nothing: no final
  // norm, no lm_head.
  const int64_t R = batch.logits_rows.dim(0);
  if (R == 0) return ops.alloc(act, {0, config_.vocab_size});
  Tensor last = ops.alloc(act, {R, H});
  Tensor last_proj = ops.alloc(act, {R, H});
  Tensor final_normed = ops.alloc(act, {R, H});
  ops.gather_rows(last, residual, batch.logits_rows);
  ops.gather_rows(last_proj, proj, batch.logits_rows);
  ops.add_rms_norm(last, last_proj, final_normed, weights_.final_norm, eps);
  Tensor logits = ops.alloc(act, {R, config_.vocab_size});
  ops.linear(logits, final_normed, weights_.lm_head);
  return logits;
}

}  // namespace pagoda
