// CudaOps::copy_kv_blocks: blocks of a bf16 and an FP8 cache (codes and exponents) copied to host slots in the
// layout KvCacheSpec::host_layer_bytes names, then back into other blocks, byte for byte; offloads run before
// loads within one call (a block offloaded and refilled in the same step keeps its old bytes on the host);
// more copies than one launch takes.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "pagoda/backend/cuda/cuda_ops.h"

namespace pagoda {
namespace {

std::vector<uint8_t> download(const Tensor& t) {
  std::vector<uint8_t> out(static_cast<size_t>(t.nbytes()));
  PAGODA_CUDA_CHECK(cudaDeviceSynchronize());
  PAGODA_CUDA_CHECK(cudaMemcpy(out.data(), t.data, out.size(), cudaMemcpyDeviceToHost));
  return out;
}

void fill_random(const Tensor& t, std::mt19937& rng) {
  std::vector<uint8_t> bytes(static_cast<size_t>(t.nbytes()));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  PAGODA_CUDA_CHECK(cudaMemcpy(t.data, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
}

// All of a cache's tensors, in host-slot order per layer (K, V, K exponents, V exponents).
std::vector<std::vector<Tensor>> parts(const KvCache& c) {
  std::vector<std::vector<Tensor>> out;
  for (int l = 0; l < c.spec.num_layers; ++l) {
    std::vector<Tensor> layer{c.k[l], c.v[l]};
    if (c.spec.fp8()) {
      layer.push_back(c.k_exp[l]);
      layer.push_back(c.v_exp[l]);
    }
    out.push_back(layer);
  }
  return out;
}

// Block b's bytes of every part, concatenated per layer as a host slot holds them.
std::vector<uint8_t> block_bytes(const std::vector<std::vector<std::vector<uint8_t>>>& snapshot, const KvCacheSpec& spec,
                                 int block) {
  std::vector<uint8_t> out;
  for (const auto& layer : snapshot) {
    for (size_t p = 0; p < layer.size(); ++p) {
      const int64_t n = p < 2 ? spec.block_part_bytes() : spec.block_exponent_bytes();
      out.insert(out.end(), layer[p].begin() + block * n, layer[p].begin() + (block + 1) * n);
    }
  }
  return out;
}

std::vector<std::vector<std::vector<uint8_t>>> snapshot(const KvCache& c) {
  std::vector<std::vector<std::vector<uint8_t>>> out;
  for (const auto& layer : parts(c)) {
    out.emplace_back();
    for (const Tensor& t : layer) out.back().push_back(download(t));
  }
  return out;
}

class KvBlockCopy : public ::testing::TestWithParam<DType> {};

TEST_P(KvBlockCopy, BlocksGoToHostSlotsAndComeBackIntoOtherBlocks) {
  PAGODA_SKIP_WITHOUT_GPU();
  CudaOps ops(CudaOpsOptions{.max_num_seqs = 4, .max_model_len = 256});
  KvCacheSpec spec{.num_layers = 3, .num_blocks = 600, .block_size = 16, .num_kv_heads = 2, .head_dim = 64, .dtype = GetParam()};
  KvCache cache = ops.allocate_kv_cache(spec);
  KvHostStore store = ops.allocate_kv_host_store(spec, 520);
  ASSERT_EQ(store.bytes_per_slot, spec.bytes_per_block());
  ASSERT_EQ(spec.bytes_per_block(), spec.num_layers * spec.host_layer_bytes());
  std::mt19937 rng(5);
  for (const auto& layer : parts(cache))
    for (const Tensor& t : layer) fill_random(t, rng);
  const auto before = snapshot(cache);

  // 300 offloads (two launches), and in the same call loads into blocks that were just offloaded.
  KvTransfers out;
  for (int i = 0; i < 300; ++i) out.to_host.push_back({i * 2, 519 - i});
  out.to_device.push_back({2, 519 - 7});  // block 2 (offloaded to slot 519) gets block 14's bytes (slot 512)
  out.to_device.push_back({599, 519});    // block 599 gets block 0's
  ops.copy_kv_blocks(cache, store, out);
  PAGODA_CUDA_CHECK(cudaDeviceSynchronize());
  for (int i = 0; i < 300; ++i) {
    const std::vector<uint8_t> want = block_bytes(before, spec, i * 2);
    ASSERT_EQ(0, std::memcmp(store.data + static_cast<int64_t>(519 - i) * store.bytes_per_slot, want.data(), want.size()))
        << "slot " << 519 - i;
  }
  const auto after = snapshot(cache);
  EXPECT_EQ(block_bytes(after, spec, 2), block_bytes(before, spec, 14));
  EXPECT_EQ(block_bytes(after, spec, 599), block_bytes(before, spec, 0));
  EXPECT_EQ(block_bytes(after, spec, 1), block_bytes(before, spec, 1));  // untouched
  EXPECT_EQ(block_bytes(after, spec, 598), block_bytes(before, spec, 598));
  ops.free_kv_host_store(store);
  ops.free_kv_cache(cache);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KvBlockCopy, ::testing::Values(DType::kBF16, DType::kF8E4M3));

// The host tier's bandwidth on the Llama-3-8B shape (2 MiB a bf16 block): N blocks to the host, then back. A
// measurement for docs/PERFORMANCE.md, run only with PAGODA_PROFILE=1.
TEST(KvBlockCopyProfile, PrintsSwapBandwidthOnLlamaShape) {
  PAGODA_SKIP_WITHOUT_GPU();
  PAGODA_SKIP_UNLESS_PROFILING();
  CudaOps ops(CudaOpsOptions{.max_num_seqs = 4, .max_model_len = 256});
  for (DType dtype : {DType::kBF16, DType::kF8E4M3}) {
    KvCacheSpec spec{.num_layers = 32, .num_blocks = 2048, .block_size = 16, .num_kv_heads = 8, .head_dim = 128, .dtype = dtype};
    KvCache cache = ops.allocate_kv_cache(spec);
    KvHostStore store = ops.allocate_kv_host_store(spec, 1024);
    for (int n : {1, 8, 64, 256, 1024}) {
      KvTransfers out, in;
      for (int i = 0; i < n; ++i) {
        out.to_host.push_back({(i * 7) % spec.num_blocks, i});
        in.to_device.push_back({(i * 11 + 3) % spec.num_blocks, i});
      }
      double seconds[2];
      for (int dir = 0; dir < 2; ++dir) {
        ops.copy_kv_blocks(cache, store, dir == 0 ? out : in);  // warm
        PAGODA_CUDA_CHECK(cudaDeviceSynchronize());
        const auto start = std::chrono::steady_clock::now();
        constexpr int kReps = 5;
        for (int r = 0; r < kReps; ++r) ops.copy_kv_blocks(cache, store, dir == 0 ? out : in);
        PAGODA_CUDA_CHECK(cudaDeviceSynchronize());
        seconds[dir] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kReps;
      }
      const double bytes = static_cast<double>(n) * static_cast<double>(spec.bytes_per_block());
      std::printf("kv block copy %s: %5d blocks (%8.1f MiB): to host %8.3f ms (%5.1f GB/s), to device %8.3f ms (%5.1f GB/s)\n",
                  dtype == DType::kBF16 ? "bf16" : "fp8 ", n, bytes / (1 << 20), seconds[0] * 1e3, bytes / seconds[0] / 1e9,
                  seconds[1] * 1e3, bytes / seconds[1] / 1e9);
    }
    ops.free_kv_host_store(store);
    ops.free_kv_cache(cache);
  }
}

}  // namespace
}  // namespace pagoda
