// Block copies between the device KV cache and the mapped host tier (kv_block_copy.h). One thread block per
// (pair, layer, K or V): 16-byte accesses when the addresses and sizes allow, bytes otherwise.
#include "pagoda/kernels/kv_block_copy.h"

#include "pagoda/kernels/cuda_check.h"

namespace pagoda::kernels {
namespace {

struct CopyArgs {
  KvBlockCopyLayout layout;
  int2 pairs[kMaxKvBlockCopies];
};

__device__ void copy_bytes(unsigned char* dst, const unsigned char* src, int64_t n) {
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) | static_cast<uintptr_t>(n)) & 15) == 0) {
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (int64_t i = threadIdx.x; i < n / 16; i += blockDim.x) d[i] = s[i];
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
  }
}

__global__ void kv_block_copy_kernel(const __grid_constant__ CopyArgs args, bool to_host) {
  const KvBlockCopyLayout& a = args.layout;
  const int2 pair = args.pairs[blockIdx.x];
  const int layer = blockIdx.y, part = blockIdx.z;  // part 0: K, 1: V
  unsigned char* dev_layer = a.dev + layer * a.layer_stride;
  unsigned char* host = a.host + pair.y * a.slot_bytes + layer * 2 * (a.part_bytes + a.exp_bytes);
  unsigned char* dev = dev_layer + (part ? a.v_offset : 0) + pair.x * a.part_bytes;
  unsigned char* h = host + part * a.part_bytes;
  to_host ? copy_bytes(h, dev, a.part_bytes) : copy_bytes(dev, h, a.part_bytes);
  if (a.exp_bytes == 0) return;
  unsigned char* dev_exp = dev_layer + (part ? a.v_exp_offset : a.k_exp_offset) + pair.x * a.exp_bytes;
  unsigned char* h_exp = host + 2 * a.part_bytes + part * a.exp_bytes;
  to_host ? copy_bytes(h_exp, dev_exp, a.exp_bytes) : copy_bytes(dev_exp, h_exp, a.exp_bytes);
}

}  // namespace

void copy_kv_blocks(const KvBlockCopyLayout& layout, const int2* pairs, int num_pairs, bool to_host,
                    cudaStream_t stream) {
  if (num_pairs <= 0) return;
  CopyArgs args{layout, {}};
  for (int i = 0; i < num_pairs; ++i) args.pairs[i] = pairs[i];
  const dim3 grid(num_pairs, layout.num_layers, 2);
  kv_block_copy_kernel<<<grid, 256, 0, stream>>>(args, to_host);
  PAGODA_CUDA_CHECK_LAUNCH("kv_block_copy_kernel");
}

}  // namespace pagoda::kernels
