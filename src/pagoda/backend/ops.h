// Ops: the operations a model is written against, and the only place backends differ. The CPU backend
// is the readable reference; the CUDA backend is the fast one. Activations are [rows, features]
// row-major in the backend's activation dtype; weights come as loaded (see loader/model_weights.h).
#pragma once

#include <vector>

#include "pagoda/backend/forward_batch.h"
#include "pagoda/core/tensor.h"
#include "pagoda/kv/kv_cache.h"
#include "pagoda/loader/model_weights.h"

namespace pagoda {

// Per-dimension-pair inverse frequencies for RoPE (rotate-half layout), including any scaling.
struct RopeParams {
  std::vector<float> inv_freq;  // [head_dim / 2]
  float attention_scaling = 1.0f;
};

class Ops {
 public:
  virtual ~Ops() = default;

  virtual Device device() const = 0;
  virtual DType activation_dtype() const = 0;
  // Scratch tensors valid until reset_workspace(); the model calls reset at the start of each forward.
  virtual Tensor alloc(DType dtype, std::initializer_list<int64_t> dims) = 0;
  virtual void reset_workspace() = 0;
  // Copies host data into a tensor on this backend (ids, positions, index arrays).
  virtual Tensor upload(const Tensor& host) = 0;

  virtual void embedding(Tensor out, Tensor ids, const Weight& table) = 0;  // out [T, H]; ids [T] I32
  virtual void rms_norm(Tensor out, Tensor x, const Weight& w, float eps) = 0;  // [T, H]
  // residual += x; out = rms_norm(residual) * w. The pre-norm residual stream in one pass.
  virtual void add_rms_norm(Tensor residual, Tensor x, Tensor out, const Weight& w, float eps) = 0;
  virtual void linear(Tensor out, Tensor x, const Weight& w) = 0;  // out [T, N] = x [T, K] · w [N, K]^T
  // Rotates q [T, num_heads, head_dim] and k [T, num_kv_heads, head_dim] in place (rotate-half layout).
  virtual void rope(Tensor q, Tensor k, Tensor positions, const RopeParams& params) = 0;
  // Writes k, v [T, num_kv_heads, head_dim] into the layer's cache at batch.slot_mapping.
  virtual void store_kv(KvCache& cache, int layer, Tensor k, Tensor v, const ForwardBatch& batch) = 0;
  // Causal attention of q [T, num_heads, head_dim] over each sequence's paged KV (GQA by head groups).
  virtual void attention(Tensor out, Tensor q, const KvCache& cache, int layer, const ForwardBatch& batch,
                         float scale) = 0;
  virtual void silu_mul(Tensor out, Tensor gate, Tensor up) = 0;  // out = silu(gate) * up, [T, I]
  virtual void gather_rows(Tensor out, Tensor x, Tensor rows) = 0;  // out [R, H] = x[rows]
  // Copies a tensor of this backend into host memory as F32 (logits for the sampler).
  virtual void download_f32(Tensor host_out, Tensor x) = 0;

  virtual KvCache allocate_kv_cache(const KvCacheSpec& spec) = 0;
};

}  // namespace pagoda
