// KvCache: the paged key/value tensors of every layer. A block holds `block_size` consecutive token
// positions of one sequence; sequences reach their blocks through block tables (ForwardBatch::kv_pages),
// so the cache itself knows nothing of sequences. Owned by the backend that allocated it.
#pragma once

#include <vector>

#include "pagoda/core/tensor.h"

namespace pagoda {

struct KvCacheSpec {
  int num_layers = 0;
  int num_blocks = 0;
  int block_size = 16;
  int num_kv_heads = 0;
  int head_dim = 0;
  DType dtype = DType::kF32;

  int64_t bytes_per_block() const {  // K and V of all layers
    return 2LL * num_layers * block_size * num_kv_heads * head_dim * dtype_block_bytes(dtype);
  }
  int64_t num_tokens() const { return static_cast<int64_t>(num_blocks) * block_size; }
};

struct KvCache {
  KvCacheSpec spec;
  std::vector<Tensor> k;  // per layer: [num_blocks, block_size, num_kv_heads, head_dim]
  std::vector<Tensor> v;  // per layer: [num_blocks, block_size, num_kv_heads, head_dim]
};

}  // namespace pagoda
