// LlamaModel: the Llama architecture (GQA, RoPE, RMSNorm, SwiGLU, tied or untied output), written once
// against Ops. forward() runs one ForwardBatch and returns logits only for batch.logits_rows.
#pragma once

#include "pagoda/backend/forward_batch.h"
#include "pagoda/backend/ops.h"
#include "pagoda/kv/kv_cache.h"
#include "pagoda/loader/model_config.h"
#include "pagoda/loader/model_weights.h"

namespace pagoda {

class LlamaModel {
 public:
  LlamaModel(const ModelConfig& config, const ModelWeights& weights);

  const ModelConfig& config() const { return config_; }
  KvCacheSpec kv_cache_spec(int num_blocks, int block_size, DType kv_dtype) const;

  // Returns logits [batch.logits_rows.dim(0), vocab] in the backend's activation dtype, valid until the
  // next forward (they live in the Ops workspace).
  Tensor forward(Ops& ops, const ForwardBatch& batch, KvCache& cache) const;

 private:
  ModelConfig config_;
  const ModelWeights& weights_;
  RopeParams rope_;
  float attn_scale_;
};

}  // namespace pagoda
