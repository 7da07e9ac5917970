// The calibration forward: the CPU backend's fp32 kernels (linear, RMSNorm, RoPE) and a plain causal
// GQA attention over whole sequences (no KV cache: every sequence is one prefill).
#include "pagoda/quantize/dense_layer.h"

#include <algorithm>
#include <cmath>

#include "pagoda/backend/cpu/cpu_kernels.h"

namespace pagoda::quantizer {
namespace {

// out [M, heads*hd] = softmax(q k^T / sqrt(hd), causal) v per sequence and head; q [M, heads*hd] after
// RoPE, k and v [M, kv*hd].
void causal_attention(const LayerShape& shape, const Batch& batch, const Matrix& q, const Matrix& k, const Matrix& v,
                      Matrix& out) {
  const int64_t hd = shape.head_dim, heads = shape.num_heads, group = shape.num_heads / shape.num_kv_heads;
  const int64_t t_len = batch.seq_len;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t s = 0; s < batch.num_seqs; ++s)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kvh = h / group;
      std::vector<float> scores(static_cast<size_t>(t_len));
      for (int64_t t = 0; t < t_len; ++t) {
        const float* qr = q.row(s * t_len + t) + h * hd;
        float mx = -INFINITY;
        for (int64_t j = 0; j <= t; ++j) {
          const float* kr = k.row(s * t_len + j) + kvh * hd;
          float dot = 0.0f;
          for (int64_t d = 0; d < hd; ++d) dot += qr[d] * kr[d];
          scores[j] = dot * scale;
          mx = std::max(mx, scores[j]);
        }
        float sum = 0.0f;
        for (int64_t j = 0; j <= t; ++j) {
          scores[j] = std::exp(scores[j] - mx);
          sum += scores[j];
        }
        float* o = out.row(s * t_len + t) + h * hd;
        std::fill(o, o + hd, 0.0f);
        for (int64_t j = 0; j <= t; ++j) {
          const float p = scores[j] / sum;
          const float* vr = v.row(s * t_len + j) + kvh * hd;
          for (int64_t d = 0; d < hd; ++d) o[d] += p * vr[d];
        }
      }
    }
}

}  // namespace

Matrix linear(const Matrix& x, const Matrix& w) {
  Matrix y(x.rows, w.rows);
  cpu::linear_f32(y.data.data(), x.data.data(), x.rows, w.data.data(), DType::kF32, w.rows, w.cols);
  return y;
}

Matrix rms_norm(const Matrix& x, const std::vector<float>& weight, float eps) {
  Matrix y(x.rows, x.cols);
  cpu::rms_norm_f32(y.data.data(), x.data.data(), weight.data(), x.rows, x.cols, eps);
  return y;
}

Matrix attention_block(const DenseLayer& layer, const LayerShape& shape, const Batch& batch, const Matrix& normed,
                       const Matrix& wq, const Matrix& wk, const Matrix& wv, Matrix* o_in) {
  Matrix q = linear(normed, wq);  // [M, heads*hd]
  Matrix k = linear(normed, wk);  // [M, kv*hd]
  const Matrix v = linear(normed, wv);
  std::vector<int32_t> positions(static_cast<size_t>(batch.tokens()));
  for (int64_t i = 0; i < batch.tokens(); ++i) positions[i] = static_cast<int32_t>(i % batch.seq_len);
  const float* inv_freq = shape.rope->inv_freq.data();
  cpu::rope_f32(q.data.data(), positions.data(), q.rows, shape.num_heads, shape.head_dim, inv_freq);
  cpu::rope_f32(k.data.data(), positions.data(), k.rows, shape.num_kv_heads, shape.head_dim, inv_freq);
  Matrix attn(normed.rows, static_cast<int64_t>(shape.num_heads) * shape.head_dim);
  causal_attention(shape, batch, q, k, v, attn);
  Matrix out = linear(attn, layer.wo);
  if (o_in != nullptr) *o_in = std::move(attn);
  return out;
}

Matrix mlp_block(const DenseLayer& layer, const Matrix& normed, const Matrix& w_gate, const Matrix& w_up,
                 Matrix* down_in) {
  Matrix gate = linear(normed, w_gate);  // [M, inter]
  const Matrix up = linear(normed, w_up);
  for (size_t i = 0; i < gate.data.size(); ++i) {
    const float g = gate.data[i];
    gate.data[i] = g / (1.0f + std::exp(-g)) * up.data[i];  // silu(gate) * up
  }
  Matrix out = linear(gate, layer.w_down);
  if (down_in != nullptr) *down_in = std::move(gate);
  return out;
}

Matrix layer_forward(const DenseLayer& layer, const LayerShape& shape, const Batch& batch, const Matrix& x,
                     LayerInputs* inputs) {
  Matrix attn_in = rms_norm(x, layer.attn_norm, shape.rms_norm_eps);
  Matrix o_in;
  Matrix h = attention_block(layer, shape, batch, attn_in, layer.wq, layer.wk, layer.wv, &o_in);
  for (size_t i = 0; i < h.data.size(); ++i) h.data[i] += x.data[i];
  Matrix mlp_in = rms_norm(h, layer.ffn_norm, shape.rms_norm_eps);
  Matrix down_in;
  Matrix out = mlp_block(layer, mlp_in, layer.w_gate, layer.w_up, &down_in);
  for (size_t i = 0; i < out.data.size(); ++i) out.data[i] += h.data[i];
  if (inputs != nullptr) *inputs = {std::move(attn_in), std::move(o_in), std::move(mlp_in), std::move(down_in)};
  return out;
}

}  // namespace pagoda::quantizer
