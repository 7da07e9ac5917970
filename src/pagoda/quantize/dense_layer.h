// DenseLayer: one Llama decoder layer in fp32 on the host, and its forward over calibration batches (S
// sequences of T tokens each, positions 0..T-1, causal): RMSNorm, q/k/v, RoPE, GQA attention, o_proj,
// residual, RMSNorm, SwiGLU MLP, residual. AWQ runs it (and its attention and MLP blocks alone) to collect
// each linear's inputs and to measure the output error of candidate scales.
#pragma once

#include <vector>

#include "pagoda/backend/ops.h"
#include "pagoda/quantize/matrix.h"

namespace pagoda::quantizer {

struct LayerShape {
  int hidden = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int intermediate = 0;
  float rms_norm_eps = 1e-5f;
  const RopeParams* rope = nullptr;
};

struct DenseLayer {
  std::vector<float> attn_norm{};  // [hidden]
  Matrix wq, wk, wv, wo;           // [heads*hd, hidden], [kv*hd, hidden] x2, [hidden, heads*hd]
  std::vector<float> ffn_norm{};   // [hidden]
  Matrix w_gate, w_up, w_down;     // [inter, hidden] x2, [hidden, inter]
};

// The activations of a calibration batch: rows are tokens, sequence s at rows [s*T, (s+1)*T).
struct Batch {
  int64_t num_seqs = 0;
  int64_t seq_len = 0;
  int64_t tokens() const { return num_seqs * seq_len; }
};

// The inputs of every linear in one layer forward, [tokens, in_features] each.
struct LayerInputs {
  Matrix attn_in;  // input_layernorm(x): q/k/v's input
  Matrix o_in;     // attention output before o_proj
  Matrix mlp_in;   // post_attention_layernorm(h): gate/up's input
  Matrix down_in;  // silu(gate) * up
};

// y [M, N] = x [M, K] · w [N, K]^T.
Matrix linear(const Matrix& x, const Matrix& w);
Matrix rms_norm(const Matrix& x, const std::vector<float>& weight, float eps);
// self_attn(normed) -> [M, hidden]; `wq/wk/wv` may replace the layer's (the AWQ search's candidates);
// `o_in`, when given, receives the attention output before o_proj.
Matrix attention_block(const DenseLayer& layer, const LayerShape& shape, const Batch& batch, const Matrix& normed,
                       const Matrix& wq, const Matrix& wk, const Matrix& wv, Matrix* o_in = nullptr);
// mlp(normed) -> [M, hidden]; `down_in`, when given, receives silu(gate) * up.
Matrix mlp_block(const DenseLayer& layer, const Matrix& normed, const Matrix& w_gate, const Matrix& w_up,
                 Matrix* down_in = nullptr);
// The whole layer: x [M, hidden] -> the next layer's input, recording every linear's input.
Matrix layer_forward(const DenseLayer& layer, const LayerShape& shape, const Batch& batch, const Matrix& x,
                     LayerInputs* inputs);

}  // namespace pagoda::quantizer
