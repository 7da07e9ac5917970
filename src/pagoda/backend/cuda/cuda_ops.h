// CudaOps: the GPU backend. bf16 weights, activations and KV cache with fp32 accumulation; cuBLAS for
// GEMMs with more than a few rows, our own kernels (src/pagoda/kernels/) for everything else. Steps run on
// one stream; a step's inputs reach the device in one copy (StepInputs), decode-only steps replay CUDA
// graphs captured per padded batch size, and sampling returns before its tokens reach the host, so the
// next step can be staged meanwhile (device_sampling.cpp). No CUDA header leaks out of this file.
#pragma once

#include <memory>

#include "pagoda/backend/ops.h"

namespace pagoda {

struct CudaOpsOptions {
  int device = 0;
  int max_num_seqs = 256;   // the largest decode graph
  int max_model_len = 0;    // the longest context a graph's attention must cover
  bool enforce_eager = false;  // no CUDA graphs
};

struct GpuMemoryInfo {
  int64_t free = 0;
  int64_t total = 0;
};

class CudaOps final : public Ops {
 public:
  explicit CudaOps(const CudaOpsOptions& options);
  ~CudaOps() override;

  Device device() const override { return Device::kCuda; }
  DType activation_dtype() const override { return DType::kBF16; }
  Tensor alloc(DType dtype, std::initializer_list<int64_t> dims) override;
  void reset_workspace() override;
  Tensor upload(const Tensor& host) override;

  void embedding(Tensor out, Tensor ids, const Weight& table) override;
  void rms_norm(Tensor out, Tensor x, const Weight& w, float eps) override;
  void add_rms_norm(Tensor residual, Tensor x, Tensor out, const Weight& w, float eps) override;
  void linear(Tensor out, Tensor x, const Weight& w) override;
  void linear_add_rms_norm(Tensor residual, Tensor proj, Tensor x, const Weight& w, Tensor out, const Weight& norm,
                           float eps, const Weight* reader) override;
  void rope(Tensor q, Tensor k, Tensor positions, const RopeParams& params) override;
  void store_kv(KvCache& cache, int layer, Tensor k, Tensor v, const ForwardBatch& batch) override;
  void attention(Tensor out, Tensor q, const KvCache& cache, int layer, const ForwardBatch& batch,
                 float scale) override;
  void silu_mul(Tensor out, Tensor gate, Tensor up) override;
  void gather_rows(Tensor out, Tensor x, Tensor rows) override;
  void download_f32(Tensor host_out, Tensor x) override;
  KvCache allocate_kv_cache(const KvCacheSpec& spec) override;
  void free_kv_cache(KvCache& cache) override;
  KvHostStore allocate_kv_host_store(const KvCacheSpec& spec, int num_slots) override;
  void free_kv_host_store(KvHostStore& store) override;
  void copy_kv_blocks(KvCache& cache, KvHostStore& store, const KvTransfers& transfers) override;
  void qkv_rope_store(Tensor q_out, Tensor x, const Weight& wqkv, KvCache& cache, int layer, const ForwardBatch& batch,
                      const RopeParams& params) override;
  void gate_up_silu(Tensor out, Tensor x, const Weight& w_gate_up) override;

  ModelWeights prepare_weights(const ModelWeights& host, const ModelConfig& config, bool show_progress,
                               const ModelWeights* shared = nullptr) override;
  Tensor run_step(const ForwardBatch& host_batch, const ForwardFn& forward, int graph_set = 0) override;
  int last_graph_batch_size() const override;
  void warm_up_decode(const ForwardFn& forward, bool capture_graphs, int graph_set = 0) override;
  bool can_sample() const override { return true; }
  PendingSample enqueue_sample(Tensor logits, std::span<const DeviceSamplingRow> rows) override;
  void wait_sample(const PendingSample& pending, std::span<TokenId> out) override;
  bool sample_ready(const PendingSample& pending) const override;
  PendingSample enqueue_step_end();  // enqueue_sample of no rows

  // Device memory now (after weights, workspace and caches), for sizing the KV pool.
  GpuMemoryInfo memory_info() const;
  // Copies a device tensor to host memory as-is (tests).
  void download(void* host, Tensor x);
  void synchronize();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda
