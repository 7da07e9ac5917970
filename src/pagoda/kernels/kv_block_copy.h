// Copies of whole KV blocks between the device cache and the host KV tier (kv/host_tier.h), for the
// copies one step runs: one launch per direction and up to kMaxKvBlockCopies blocks, every layer's K and V
// (and FP8 exponents) of each block. The host tier's memory is pinned and mapped, so the kernel reads and
// writes it over the bus directly: no staging, no per-block copy calls.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pagoda::kernels {

constexpr int kMaxKvBlockCopies = 240;  // pairs passed by value (the kernel parameters stay under 4 KiB)

// Where a block's parts are. Device cache: layer l's K of block b at dev + l * layer_stride +
// b * part_bytes, its V at + v_offset, K exponents at + k_exp_offset + b * exp_bytes, V exponents at
// + v_exp_offset + b * exp_bytes (exp_bytes 0: no exponents). Host slot s, layer l: at host +
// s * slot_bytes + l * 2 * (part_bytes + exp_bytes), K, V, K exponents, V exponents in that order.
struct KvBlockCopyLayout {
  unsigned char* dev = nullptr;
  int64_t layer_stride = 0, v_offset = 0, k_exp_offset = 0, v_exp_offset = 0;
  int64_t part_bytes = 0, exp_bytes = 0;
  unsigned char* host = nullptr;  // the device's pointer to the mapped host memory
  int64_t slot_bytes = 0;
  int num_layers = 0;
};

// pairs[i] = {device block, host slot}; to_host: block -> slot, else slot -> block. num_pairs <= kMaxKvBlockCopies.
void copy_kv_blocks(const KvBlockCopyLayout& layout, const int2* pairs, int num_pairs, bool to_host,
                    cudaStream_t stream);

}  // namespace pagoda::kernels
