// CudaOps' KV cache storage: the device cache (one buffer, every layer's K, V and FP8 exponents at fixed offsets),
// the host KV tier's pinned, mapped store, and the block copies between them (kernels/kv_block_copy.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "pagoda/backend/cuda/cuda_ops.h"
#include "pagoda/backend/cuda/cuda_ops_impl.h"
#include "pagoda/core/error.h"
#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/kv_block_copy.h"

namespace pagoda {

using cuda::DeviceBuffer;

KvCache CudaOps::allocate_kv_cache(const KvCacheSpec& spec) {
  PAGODA_CHECK(spec.dtype == DType::kBF16 || spec.fp8(), "the CUDA backend keeps its KV cache in BF16 or FP8, not {}",
               dtype_name(spec.dtype));
  KvCache cache;
  cache.spec = spec;
  // One buffer: per layer K, V (and for FP8 their exponents), each tensor at a 256-byte boundary.
  const int64_t rows = static_cast<int64_t>(spec.num_blocks) * spec.block_size * spec.num_kv_heads;
  const auto padded = [](int64_t bytes) { return (bytes + 255) / 256 * 256; };
  const int64_t kv_bytes = padded(rows * spec.head_dim * dtype_block_bytes(spec.dtype));
  const int64_t exp_bytes = spec.fp8() ? padded(rows) : 0;
  const int64_t layer_bytes = 2 * (kv_bytes + exp_bytes);
  DeviceBuffer storage(static_cast<size_t>(spec.num_layers * layer_bytes));
  PAGODA_CUDA_CHECK(cudaMemsetAsync(storage.data(), 0, storage.size(), impl_->stream));
  auto* base = static_cast<unsigned char*>(storage.data());
  for (int l = 0; l < spec.num_layers; ++l) {
    unsigned char* layer = base + l * layer_bytes;
    const int64_t dims[] = {spec.num_blocks, spec.block_size, spec.num_kv_heads, spec.head_dim};
    cache.k.push_back(Tensor::from_span(layer, spec.dtype, dims, Device::kCuda));
    cache.v.push_back(Tensor::from_span(layer + kv_bytes, spec.dtype, dims, Device::kCuda));
    if (!spec.fp8()) continue;
    const int64_t exp_dims[] = {spec.num_blocks, spec.num_kv_heads, spec.block_size};
    cache.k_exp.push_back(Tensor::from_span(layer + 2 * kv_bytes, DType::kI8, exp_dims, Device::kCuda));
    cache.v_exp.push_back(Tensor::from_span(layer + 2 * kv_bytes + exp_bytes, DType::kI8, exp_dims, Device::kCuda));
  }
  impl_->kv_storage.emplace(storage.data(), std::move(storage));
  // The step inputs made for this cache's longest block tables (max_num_seqs sequences of max_model_len tokens, at
  // most 4M entries, 16 MiB a buffer) before any graph takes their addresses: growing them while serving would wait
  // for the device and drop every graph.
  if (impl_->options.max_model_len > 0) {
    const int64_t per_seq = (static_cast<int64_t>(impl_->options.max_model_len) + spec.block_size - 1) / spec.block_size;
    const int64_t pages = std::min<int64_t>(per_seq * impl_->options.max_num_seqs, int64_t{1} << 22);
    bool moved = false;
    impl_->inputs.reserve(0, impl_->options.max_num_seqs, static_cast<int>(pages), impl_->stream, &moved);
    if (moved) impl_->drop_graphs();
  }
  synchronize();
  return cache;
}

void CudaOps::free_kv_cache(KvCache& cache) {
  if (!cache.k.empty()) {
    synchronize();
    impl_->drop_graphs();  // graphs read the cache's addresses
    impl_->kv_storage.erase(cache.k[0].data);
  }
  cache = KvCache{};
}

KvHostStore CudaOps::allocate_kv_host_store(const KvCacheSpec& spec, int num_slots) {
  PAGODA_CHECK(num_slots >= 0, "{} host slots", num_slots);
  KvHostStore store{nullptr, num_slots, spec.bytes_per_block()};
  if (num_slots == 0) return store;
  // Pinned and mapped: the copy kernel reads and writes it over the bus (kernels/kv_block_copy.h).
  void* host = nullptr;
  const size_t bytes = static_cast<size_t>(store.bytes_per_slot) * static_cast<size_t>(num_slots);
  if (cudaHostAlloc(&host, bytes, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();
    throw Error(fmt::format("cannot pin {:.2f} GiB of host memory for the host KV tier (--kv-offload-memory)",
                            static_cast<double>(bytes) / (1 << 30)));
  }
  store.data = static_cast<std::byte*>(host);
  return store;
}

void CudaOps::free_kv_host_store(KvHostStore& store) {
  if (store.data != nullptr) {
    synchronize();
    cudaFreeHost(store.data);
  }
  store = KvHostStore{};
}

void CudaOps::copy_kv_blocks(KvCache& cache, KvHostStore& store, const KvTransfers& transfers) {
  if (transfers.empty()) return;
  const KvCacheSpec& spec = cache.spec;
  // allocate_kv_cache lays the layers out at one stride, each layer's tensors at fixed offsets.
  auto* base = static_cast<unsigned char*>(cache.k[0].data);
  const auto offset = [&](const Tensor& t) { return static_cast<unsigned char*>(t.data) - base; };
  kernels::KvBlockCopyLayout layout;
  layout.dev = base;
  layout.layer_stride = spec.num_layers > 1 ? offset(cache.k[1]) : 0;
  layout.v_offset = offset(cache.v[0]);
  layout.k_exp_offset = spec.fp8() ? offset(cache.k_exp[0]) : 0;
  layout.v_exp_offset = spec.fp8() ? offset(cache.v_exp[0]) : 0;
  layout.part_bytes = spec.block_part_bytes();
  layout.exp_bytes = spec.block_exponent_bytes();
  void* host = nullptr;
  PAGODA_CUDA_CHECK(cudaHostGetDevicePointer(&host, store.data, 0));
  layout.host = static_cast<unsigned char*>(host);
  layout.slot_bytes = store.bytes_per_slot;
  layout.num_layers = spec.num_layers;
  const auto run = [&](const std::vector<KvBlockCopy>& copies, bool to_host) {
    std::vector<int2> pairs;
    pairs.reserve(copies.size());
    for (const KvBlockCopy& c : copies) {
      PAGODA_CHECK(c.block >= 0 && c.block < spec.num_blocks && c.slot >= 0 && c.slot < store.num_slots,
                   "block copy {} <-> slot {} out of range", c.block, c.slot);
      pairs.push_back(int2{c.block, c.slot});
    }
    for (size_t i = 0; i < pairs.size(); i += kernels::kMaxKvBlockCopies) {
      const int n = static_cast<int>(std::min<size_t>(kernels::kMaxKvBlockCopies, pairs.size() - i));
      kernels::copy_kv_blocks(layout, pairs.data() + i, n, to_host, impl_->stream);
    }
  };
  run(transfers.to_host, true);
  run(transfers.to_device, false);
}

}  // namespace pagoda
