// Ops: the operations a model is written against, and the only place backends differ. The CPU backend
// is the readable reference; the CUDA backend is the fast one. Activations are [rows, features]
// row-major in the backend's activation dtype; weights come as loaded (see loader/model_weights.h).
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "pagoda/backend/forward_batch.h"
#include "pagoda/core/tensor.h"
#include "pagoda/core/types.h"
#include "pagoda/kv/host_tier.h"
#include "pagoda/kv/kv_cache.h"
#include "pagoda/loader/model_config.h"
#include "pagoda/loader/model_weights.h"

namespace pagoda {

// Per-dimension-pair inverse frequencies for RoPE (rotate-half layout), including any scaling.
struct RopeParams {
  std::vector<float> inv_freq;  // [head_dim / 2]
  float attention_scaling = 1.0f;
};

// One row's sampling settings for a backend that samples on the device (see Ops::sample). Rows with
// penalties, logit bias or logprobs never get here: the CPU sampler handles those.
struct DeviceSamplingRow {
  float temperature = 0.0f;  // < 1e-5: greedy
  int top_k = 0;             // <= 0: off
  float top_p = 1.0f;        // >= 1: off
  float min_p = 0.0f;        // <= 0: off
  uint64_t seed = 0;
  uint64_t offset = 0;  // tokens the request has sampled so far: (seed, offset) fixes the draw
};

// A model forward over a batch whose arrays live on the backend; returns the logits.
using ForwardFn = std::function<Tensor(const ForwardBatch& batch)>;

// Device sampling that was enqueued and not yet waited for (see Ops::enqueue_sample).
struct PendingSample {
  int slot = -1;      // the backend's staging slot holding the tokens on their way to the host
  int num_rows = 0;
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
  // An output projection and the residual norm after it: proj = x · w^T, then add_rms_norm(residual, proj, out,
  // norm). proj [T, H] is scratch: afterwards it holds what the backend left there (the CUDA backend's FP8 W8A8
  // path leaves the GEMM's unscaled sums, which its norm kernel scales as it reads them). The default runs the two.
  // `reader`, if not null, is the weight of the op that reads `out` next (qkv_rope_store, gate_up_silu or linear,
  // before anything else reads `out`): a backend may then leave the norm to that op's kernel, which normalises the
  // residual as it loads it (the CUDA backend's few-token quantized GEMV), and not write `out` at all.
  virtual void linear_add_rms_norm(Tensor residual, Tensor proj, Tensor x, const Weight& w, Tensor out,
                                   const Weight& norm, float eps, const Weight* reader) {
    (void)reader;
    linear(proj, x, w);
    add_rms_norm(residual, proj, out, norm, eps);
  }
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
  virtual void free_kv_cache(KvCache& cache) = 0;
  // The host KV tier's memory: `num_slots` blocks of `spec`'s layout (pinned where the device copies from
  // it), or an empty store for 0. Throws pagoda::Error when it cannot be allocated.
  virtual KvHostStore allocate_kv_host_store(const KvCacheSpec& spec, int num_slots) = 0;
  virtual void free_kv_host_store(KvHostStore& store) = 0;
  // A step's host-tier copies (kv/host_tier.h), after the work already enqueued and before what follows:
  // every transfers.to_host block -> slot copy, then every transfers.to_device slot -> block copy.
  virtual void copy_kv_blocks(KvCache& cache, KvHostStore& store, const KvTransfers& transfers) = 0;

  // --- Fused forms, used when the backend fused the weights (LayerWeights::wqkv, w_gate_up). ---
  // The attention's input projection: q_out [T, nh, hd] = rope(x · Wq^T); rope(x · Wk^T) and x · Wv^T go
  // into the cache at batch.slot_mapping. wqkv is the backend's fused QKV weight [(nh + 2 nkv) hd, H] (its
  // row layout is the backend's own: prepare_weights made it).
  virtual void qkv_rope_store(Tensor q_out, Tensor x, const Weight& wqkv, KvCache& cache, int layer,
                              const ForwardBatch& batch, const RopeParams& params) = 0;
  // The SwiGLU MLP's first half: out [T, I] = silu(x · gate^T) * (x · up^T) for x [T, H], with the
  // backend's fused gate-up weight [2I, H] (its row layout is the backend's own: prepare_weights made it).
  virtual void gate_up_silu(Tensor out, Tensor x, const Weight& w_gate_up) = 0;

  // --- Whole-step hooks with portable defaults. ---
  // The weights this backend computes with: the CPU uses the host views as they are; the CUDA backend
  // uploads them (bf16, QKV and gate-up fused) and returns device views it owns. `shared`: a set this
  // backend prepared earlier for the same model whose embedding, norms and lm_head equal `host`'s (a second
  // weight set that differs only in its linears: --fallback-quantization); those are taken from it, not
  // uploaded again.
  virtual ModelWeights prepare_weights(const ModelWeights& host, const ModelConfig& config, bool show_progress,
                                       const ModelWeights* shared = nullptr) {
    return host;
  }
  // Runs one step: `host_batch` arrays are in host memory. The default runs forward on them directly;
  // the CUDA backend copies them to the device in one transfer, fills the tokens taken from the previous
  // step's samples (ForwardBatch::token_from_prev_sample) on the device, and replays a captured CUDA
  // graph for decode-only steps. The logits it returns are valid until the next step. Work may still be
  // running on the device when it returns. `graph_set` keeps apart the graphs of forwards that differ in
  // more than their inputs (each weight set of --fallback-quantization has its own): 0 or 1.
  virtual Tensor run_step(const ForwardBatch& host_batch, const ForwardFn& forward, int graph_set = 0) {
    PAGODA_CHECK(host_batch.num_tokens_from_prev_sample == 0, "this backend reads every input token from the host");
    return forward(host_batch);
  }
  // The calling thread will run no more kernels (the engine calls this on the thread that built it, before its own
  // thread warms up and takes over): what the backend keeps for that thread can go.
  virtual void release_calling_thread() {}
  // The padded batch size of the CUDA graph the last run_step replayed; 0 when it ran eagerly.
  virtual int last_graph_batch_size() const { return 0; }
  // Prepares later decode steps: runs the largest decode step once (so the workspace reaches its final
  // size) and, when `capture_graphs`, captures the CUDA graphs (of `graph_set`, as run_step).
  virtual void warm_up_decode(const ForwardFn& forward, bool capture_graphs, int graph_set = 0) {}
  // Device-side sampling: one token per row of logits [rows, vocab]. Only when can_sample() is true.
  // In two halves, so that the host can plan the next step meanwhile: enqueue_sample() queues the draw
  // after the step's work and returns at once; wait_sample() blocks until those tokens reach the host.
  // The tokens also stay on the device for the next run_step's token_from_prev_sample, until the next
  // enqueue_sample that draws any. With no rows, enqueue_sample marks the end of the step's work, which
  // wait_sample waits for. At most two samples may be outstanding (one waited for, the next enqueued).
  virtual bool can_sample() const { return false; }
  virtual PendingSample enqueue_sample(Tensor logits, std::span<const DeviceSamplingRow> rows) {
    PAGODA_CHECK(false, "this backend does not sample on the device");
    return {};
  }
  virtual void wait_sample(const PendingSample& pending, std::span<TokenId> out) {
    PAGODA_CHECK(false, "this backend does not sample on the device");
  }
  // Whether wait_sample would return at once (the step and its download are done). Does not wait.
  virtual bool sample_ready(const PendingSample& pending) const { return true; }
  // Both halves at once.
  void sample(std::span<TokenId> out, Tensor logits, std::span<const DeviceSamplingRow> rows) {
    wait_sample(enqueue_sample(logits, rows), out);
  }
};

}  // namespace pagoda
