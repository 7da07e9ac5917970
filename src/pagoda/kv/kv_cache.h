// KvCache: the paged key/value tensors of every layer. A block holds `block_size` consecutive token
// positions of one sequence; sequences reach their blocks through block tables (ForwardBatch::kv_pages),
// so the cache itself knows nothing of sequences. Owned by the backend that allocated it.
#pragma once

#include <cstddef>
#include <vector>

#include "pagoda/core/tensor.h"

namespace pagoda {

// FP8 KV scales: one per (token, KV head) row, computed as the row is written (the default, kv_fp8.h), or
// one per layer for K and one for V, from the amax of the first batch written after start-up (vLLM's
// --calculate-kv-scales; CPU only). Either way every row carries its exponent, so attention is the same.
enum class Fp8KvScales { kPerRow, kPerLayer };
constexpr int8_t kFp8KvUncalibrated = -128;  // below every exponent kv_fp8.h gives

struct KvCacheSpec {
  int num_layers = 0;
  int num_blocks = 0;
  int block_size = 16;
  int num_kv_heads = 0;
  int head_dim = 0;
  DType dtype = DType::kF32;  // kF32 / kBF16, or kF8E4M3: codes with a scale per token and head (kv_fp8.h)
  Fp8KvScales fp8_scales = Fp8KvScales::kPerRow;

  bool fp8() const { return dtype == DType::kF8E4M3; }
  int64_t bytes_per_block() const {  // K and V of all layers, with FP8's exponents
    const int64_t rows = 2LL * num_layers * block_size * num_kv_heads;
    return rows * head_dim * dtype_block_bytes(dtype) + (fp8() ? rows : 0);
  }
  // One block of one layer's K (or V), and of its FP8 exponents (0 without FP8): contiguous in the cache.
  int64_t block_part_bytes() const {
    return static_cast<int64_t>(block_size) * num_kv_heads * head_dim * dtype_block_bytes(dtype);
  }
  int64_t block_exponent_bytes() const { return fp8() ? static_cast<int64_t>(block_size) * num_kv_heads : 0; }
  // A block in a host-tier slot (KvHostStore): per layer its K, V, K exponents and V exponents, in that order.
  // bytes_per_block() == num_layers * host_layer_bytes().
  int64_t host_layer_bytes() const { return 2 * (block_part_bytes() + block_exponent_bytes()); }
  int64_t num_tokens() const { return static_cast<int64_t>(num_blocks) * block_size; }
  // FP8: where the exponent of (slot, head) sits in k_exp / v_exp. A block keeps each head's exponents
  // together ([num_blocks, num_kv_heads, block_size]), so a kernel gathers a page's with one 16-byte load.
  int64_t exponent_index(int64_t slot, int head) const {
    return ((slot / block_size) * num_kv_heads + head) * block_size + slot % block_size;
  }
};

// Host memory of the host KV tier (kv/host_tier.h): `num_slots` blocks, each laid out as
// KvCacheSpec::host_layer_bytes says. Pinned on CUDA. Owned by the backend that allocated it.
struct KvHostStore {
  std::byte* data = nullptr;
  int num_slots = 0;
  int64_t bytes_per_slot = 0;  // KvCacheSpec::bytes_per_block()
};

struct KvCache {
  KvCacheSpec spec;
  std::vector<Tensor> k;  // per layer: [num_blocks, block_size, num_kv_heads, head_dim]
  std::vector<Tensor> v;  // per layer: [num_blocks, block_size, num_kv_heads, head_dim]
  // FP8 only, per layer: I8 [num_blocks, num_kv_heads, block_size], each row's power-of-two exponent
  // (KvCacheSpec::exponent_index).
  std::vector<Tensor> k_exp{};
  std::vector<Tensor> v_exp{};
  // Fp8KvScales::kPerLayer: each layer's K and V exponents, kFp8KvUncalibrated until the layer's first store
  // after start-up (empty: none calibrated; ModelRunner clears them after its warm-up forward).
  std::vector<int8_t> k_layer_exp{};
  std::vector<int8_t> v_layer_exp{};
};

}  // namespace pagoda
