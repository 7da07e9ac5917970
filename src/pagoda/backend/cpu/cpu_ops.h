// CpuOps: the reference backend. fp32 activations and KV cache, weights read in their stored dtype,
// OpenMP across rows and heads.
#pragma once

#include <memory>
#include <vector>

#include "pagoda/backend/ops.h"
#include "pagoda/core/buffer.h"

namespace pagoda {

struct CpuOpsOptions {
  int num_threads = 0;  // 0: OpenMP's default (all cores)
  // An FP8 KV cache's pages dequantized at once by attention (K and V; at least one sequence's).
  int64_t fp8_kv_scratch_bytes = int64_t{64} << 20;
};

class CpuOps final : public Ops {
 public:
  explicit CpuOps(const CpuOpsOptions& options = {});

  Device device() const override { return Device::kCpu; }
  DType activation_dtype() const override { return DType::kF32; }
  Tensor alloc(DType dtype, std::initializer_list<int64_t> dims) override;
  void reset_workspace() override;
  void release_calling_thread() override;
  Tensor upload(const Tensor& host) override { return host; }

  void embedding(Tensor out, Tensor ids, const Weight& table) override;
  void rms_norm(Tensor out, Tensor x, const Weight& w, float eps) override;
  void add_rms_norm(Tensor residual, Tensor x, Tensor out, const Weight& w, float eps) override;
  void linear(Tensor out, Tensor x, const Weight& w) override;
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
  // The linears the integer kernels read, in their compact forms (compact_weights.h), stored here; the rest
  // are the host views as they are.
  ModelWeights prepare_weights(const ModelWeights& host, const ModelConfig& config, bool show_progress,
                               const ModelWeights* shared = nullptr) override;

 private:
  static void calibrate_fp8_layer_scales(KvCache& cache, int layer, Tensor k, Tensor v);
  // A bump allocator: chunks are kept across steps, so steady-state forwards allocate nothing.
  std::vector<Buffer> chunks_;
  size_t chunk_used_ = 0;
  size_t bytes_requested_ = 0;
  std::vector<Buffer> kv_storage_;
  std::vector<HostTensor> weight_storage_;  // prepare_weights' compact arrays
  std::vector<float> fp8_pages_;  // an FP8 cache's pages of the current attention call, dequantized
  int64_t fp8_kv_scratch_bytes_ = 0;
  int num_threads_ = 0;  // --threads; 0: OpenMP's default (all cores)
  std::vector<float> norm_weight_;  // a norm weight converted to fp32 (reused; the engine thread only)
};

}  // namespace pagoda
