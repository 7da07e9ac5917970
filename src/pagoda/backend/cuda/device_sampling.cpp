// CudaOps' device sampling in two halves: enqueue_sample() queues the rows' upload, the sampling kernel
// and the ids' download after the step's work, and returns; wait_sample() waits for that download. The
// ids also stay on the device at a stable address, where the next step reads its placeholder tokens.
#include <cuda_runtime.h>

#include <algorithm>

#include "pagoda/backend/cuda/cuda_ops.h"
#include "pagoda/backend/cuda/cuda_ops_impl.h"
#include "pagoda/kernels/sampling.h"

namespace pagoda {

DeviceSampling::~DeviceSampling() {
  for (Slot& s : slots)
    if (s.done) cudaEventDestroy(s.done);
}

PendingSample CudaOps::enqueue_sample(Tensor logits, std::span<const DeviceSamplingRow> rows) {
  Impl& m = *impl_;
  DeviceSampling& ds = m.sampling;
  const int n = static_cast<int>(rows.size());
  const int vocab = static_cast<int>(logits.numel() / std::max<int64_t>(logits.dim(0), 1));
  PAGODA_CHECK(logits.dtype == DType::kBF16 && logits.device == Device::kCuda && logits.dim(0) == n,
               "sampling {} rows from logits {}", n, logits.shape_string());
  const int slot_index = ds.next_slot;
  DeviceSampling::Slot& slot = ds.slots[slot_index];
  PAGODA_CHECK(!slot.outstanding, "more than two device samples outstanding");
  ds.next_slot ^= 1;

  const size_t rows_bytes = n * sizeof(kernels::SamplingRow);
  const size_t ids_bytes = n * sizeof(int32_t);
  const size_t workspace_bytes = kernels::sampling_workspace_bytes(n, vocab);
  if (!slot.done) PAGODA_CUDA_CHECK(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
  if (slot.host.size() < rows_bytes + ids_bytes) slot.host = cuda::PinnedBuffer(2 * (rows_bytes + ids_bytes));
  // Buffers that grow are freed with cudaFree, which waits for the device; the old ids are carried over
  // in stream order because the step being staged may still read them.
  if (ds.rows.size() < rows_bytes) ds.rows = cuda::DeviceBuffer(2 * rows_bytes);
  if (ds.ids.size() < ids_bytes) {
    cuda::DeviceBuffer grown(std::max<size_t>(2 * ids_bytes, 256 * sizeof(int32_t)));
    if (ds.ids.size() > 0)
      PAGODA_CUDA_CHECK(cudaMemcpyAsync(grown.data(), ds.ids.data(), ds.ids.size(), cudaMemcpyDeviceToDevice, m.stream));
    ds.ids = std::move(grown);
  }
  if (ds.workspace.size() < workspace_bytes) ds.workspace = cuda::DeviceBuffer(2 * workspace_bytes);

  auto* host_rows = static_cast<kernels::SamplingRow*>(slot.host.data());
  auto* host_ids = reinterpret_cast<int32_t*>(static_cast<char*>(slot.host.data()) + rows_bytes);
  for (int i = 0; i < n; ++i) {
    const DeviceSamplingRow& r = rows[i];
    host_rows[i] = kernels::SamplingRow{r.temperature, r.top_k, r.top_p, r.min_p, r.seed, r.offset};
  }
  auto* dev_rows = static_cast<kernels::SamplingRow*>(ds.rows.data());
  auto* dev_ids = static_cast<int32_t*>(ds.ids.data());
  PAGODA_CUDA_CHECK(cudaMemcpyAsync(dev_rows, host_rows, rows_bytes, cudaMemcpyHostToDevice, m.stream));
  kernels::sample_tokens(dev_ids, static_cast<const __nv_bfloat16*>(logits.data), dev_rows, n, vocab,
                         ds.workspace.data(), m.stream);
  PAGODA_CUDA_CHECK(cudaMemcpyAsync(host_ids, dev_ids, ids_bytes, cudaMemcpyDeviceToHost, m.stream));
  PAGODA_CUDA_CHECK(cudaEventRecord(slot.done, m.stream));
  slot.outstanding = true;
  ds.num_ids = n;
  return PendingSample{slot_index, n};
}

void CudaOps::wait_sample(const PendingSample& pending, std::span<TokenId> out) {
  DeviceSampling& ds = impl_->sampling;
  PAGODA_CHECK(pending.slot >= 0 && pending.slot < 2 && ds.slots[pending.slot].outstanding,
               "waiting for a device sample that is not outstanding");
  PAGODA_CHECK(static_cast<int>(out.size()) == pending.num_rows, "{} ids for {} rows", out.size(), pending.num_rows);
  DeviceSampling::Slot& slot = ds.slots[pending.slot];
  slot.outstanding = false;
  PAGODA_CUDA_CHECK(cudaEventSynchronize(slot.done));
  const size_t rows_bytes = pending.num_rows * sizeof(kernels::SamplingRow);
  const auto* host_ids = reinterpret_cast<const int32_t*>(static_cast<const char*>(slot.host.data()) + rows_bytes);
  std::copy(host_ids, host_ids + pending.num_rows, out.begin());
}

}  // namespace pagoda
