// ModelWeights: the tensors of a Llama-family model under canonical names, as views into storage owned
// by LoadedModel (mmap'd checkpoint or converted host copies). Linear weights are [out_features,
// in_features] row-major (PyTorch convention); Q and K rows use HF's rotate-half RoPE layout (GGUF
// files are un-permuted at load). Quantized linears (core/quant_scheme.h) keep the same rows, packed along
// in_features, with their scales and zero points beside them.
#pragma once

#include <array>
#include <string_view>
#include <vector>

#include "pagoda/core/quant_scheme.h"
#include "pagoda/core/tensor.h"

namespace pagoda {

// A weight tensor. With QuantScheme::kNone, data's dtype is F32, F16, BF16, Q8_0 or Q4_0 (quantized blocks
// run along in_features); otherwise data holds the codes and scales / zeros or offsets / g_idx the rest, in
// the layouts core/quant_scheme.h gives.
struct Weight {
  Tensor data;               // [N, K] (kInt4Group: [N, K/2]); norms [N]
  QuantScheme scheme = QuantScheme::kNone;
  Tensor scales{};           // F32 [N, groups] (F16 or I8 in the CPU's compact forms: scales_base below)
  Tensor zeros{};            // [N, groups], or empty when symmetric (kInt8Channel) or with offsets
  Tensor offsets{};          // F32 [N, groups]: value = q * s - offset, instead of zeros (quant_scheme.h)
  Tensor g_idx{};            // I32 [K], or empty when the group of k is k / group_size
  // I32 [K], or empty: the product reads input column input_order[j] as column j. Set by a backend's
  // prepare_weights on act-order weights whose columns it sorted by group (backend/cpu/act_order.h); g_idx
  // is then empty.
  Tensor input_order{};
  // A norm's I32 [H], or empty: its output column j is the normed column output_order[j]. The CUDA backend moves
  // the input_order of the act-order linear a norm feeds here (weight_upload.cpp), so that its input needs no gather.
  Tensor output_order{};
  int64_t group_size = 0;    // along K (K itself for one group per row)
  int64_t in_features = 0;   // K, set for quantized weights (data's last dim is not K for kInt4Group)
  // How the input is quantized before the product (core/quant_scheme.h): W8A8 (kFp8Channel), or int8 blocks
  // on the CPU (kInt4Group from GGUF); and the static scale of kFp8Static.
  ActivationQuant activations = ActivationQuant::kNone;
  float input_scale = 0.0f;
  std::string_view source_format{};  // the checkpoint's own name for the format it was converted from ("Q4_K"),
                                     // for `pagoda inspect`; static storage; empty when stored as it is used
  // Set by the CPU backend (Ops::prepare_weights: backend/cpu/compact_weights.h) for its compact forms: scales
  // (and offsets) F16, or I8 codes times these F32 bases [N, K / 256]; and a kInt4Group weight with neither
  // zeros nor offsets has the zero point 8 throughout.
  Tensor scales_base{}, offsets_base{};
  // Set by the CUDA backend (Ops::prepare_weights) when data and scales hold the tensor-core GEMV's tile layout
  // (backend/mma_layout/quant_tiles.h) rather than rows: data U8 codes, scales F32 params, out_features N.
  bool tiled = false;
  bool tiled_offsets = false;  // the tiles' offsets form (value = q * s - m) rather than zeros
  int64_t out_features = 0;

  bool quantized() const { return scheme != QuantScheme::kNone; }
  // K: the columns of the unpacked [N, K] matrix.
  int64_t cols() const { return quantized() ? in_features : data.dim(data.ndim - 1); }
  int64_t num_rows() const { return tiled ? out_features : data.ndim == 1 ? 1 : data.dim(0); }
  // Rows [begin, begin + count) of every per-row tensor, as a view (g_idx is per K, so shared).
  Weight rows(int64_t begin, int64_t count) const {
    Weight w = *this;
    w.data = data.rows(begin, count);
    if (!scales.empty()) w.scales = scales.rows(begin, count);
    if (!zeros.empty()) w.zeros = zeros.rows(begin, count);
    if (!offsets.empty()) w.offsets = offsets.rows(begin, count);
    if (!scales_base.empty()) w.scales_base = scales_base.rows(begin, count);
    if (!offsets_base.empty()) w.offsets_base = offsets_base.rows(begin, count);
    return w;
  }
  // Every tensor the weight holds (some may be empty): data, scales, zeros, offsets, g_idx or input_order, a norm's
  // output_order, and the compact forms' bases.
  std::array<const Tensor*, 9> tensors() const {
    return {&data, &scales, &zeros, &offsets, &g_idx, &input_order, &output_order, &scales_base, &offsets_base};
  }
  // Bytes of every tensor it holds.
  int64_t nbytes() const {
    int64_t n = 0;
    for (const Tensor* t : tensors())
      if (!t->empty()) n += t->nbytes();
    return n;
  }
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
