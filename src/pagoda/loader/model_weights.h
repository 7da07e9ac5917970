// ModelWeights: the tensors of a Llama-family model under canonical names, as views into storage owned
// by LoadedModel (mmap'd checkpoint or converted host copies). Linear weights are [out_features,
// in_features] row-major (PyTorch convention); Q and K rows use HF's rotate-half RoPE layout (GGUF
// files are un-permuted at load).
#pragma once

#include <vector>

#include "pagoda/core/tensor.h"

namespace pagoda {

// A weight tensor. dtype is F32, F16, BF16, Q8_0 or Q4_0 (quantized blocks run along in_features).
struct Weight {
  Tensor data;
};

struct LayerWeights {
  Weight attn_norm;  // [hidden]
  Weight wq;         // [num_heads * head_dim, hidden]
  Weight wk;         // [num_kv_heads * head_dim, hidden]
  Weight wv;         // [num_kv_heads * head_dim, hidden]
  Weight wo;         // [hidden, num_heads * head_dim]
  Weight ffn_norm;   // [hidden]
  Weight w_gate;     // [intermediate, hidden]
  Weight w_up;       // [intermediate, hidden]
  Weight w_down;     // [hidden, intermediate]
  // Fused forms, set only by a backend that fuses (Ops::prepare_weights), in row orders of its own; wq,
  // wk, wv, w_gate and w_up are then left empty.
  Weight wqkv;       // [(num_heads + 2 num_kv_heads) * head_dim, hidden]
  Weight w_gate_up;  // [2 * intermediate, hidden]
};

struct ModelWeights {
  Weight embed_tokens;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  Weight final_norm;  // [hidden]
  Weight lm_head;     // [vocab, hidden]; the same view as embed_tokens when tied

  // Every weight: embed_tokens, each layer's nine, final_norm, lm_head (which may alias embed_tokens).
  std::vector<Weight*> all() {
    std::vector<Weight*> out = {&embed_tokens};
    for (LayerWeights& l : layers)
      for (Weight* w : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down})
        out.push_back(w);
    out.push_back(&final_norm);
    out.push_back(&lm_head);
    return out;
  }
  std::vector<const Weight*> all() const {
    std::vector<const Weight*> out;
    for (Weight* w : const_cast<ModelWeights*>(this)->all()) out.push_back(w);
    return out;
  }
};

}  // namespace pagoda
