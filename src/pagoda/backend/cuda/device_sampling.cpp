// CudaOps' device sampling in two halves: enqueue_sample() queues the rows' upload (skipped when they are
// what the device already holds), the sampling kernel after the step's work and the ids' download on a
// copy stream, and returns; wait_sample() waits for that download. The ids also stay on the device, where
// the next step reads its placeholder tokens.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "pagoda/backend/cuda/cuda_ops.h"
#include "pagoda/backend/cuda/cuda_ops_impl.h"
#include "pagoda/core/logging.h"
#include "pagoda/kernels/sampling.h"

namespace pagoda {

DeviceSampling::~DeviceSampling() {
  for (Slot& s : slots) {
    if (s.sampled) cudaEventDestroy(s.sampled);
    if (s.done) cudaEventDestroy(s.done);
  }
  if (copy_stream) cudaStreamDestroy(copy_stream);
}

int DeviceSampling::take_slot() {
  const int index = next_slot;
  Slot& slot = slots[index];
  PAGODA_CHECK(!slot.outstanding, "more than two device samples outstanding");
  next_slot ^= 1;
  if (!slot.done) {
    PAGODA_CUDA_CHECK(cudaEventCreateWithFlags(&slot.sampled, cudaEventDisableTiming));
    PAGODA_CUDA_CHECK(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
  }
  return index;
}

PendingSample CudaOps::enqueue_sample(Tensor logits, std::span<const DeviceSamplingRow> rows) {
  Impl& m = *impl_;
  DeviceSampling& ds = m.sampling;
  const int n = static_cast<int>(rows.size());
  if (n == 0) return enqueue_step_end();
  const int vocab = static_cast<int>(logits.numel() / std::max<int64_t>(logits.dim(0), 1));
  PAGODA_CHECK(logits.dtype == DType::kBF16 && logits.device == Device::kCuda && logits.dim(0) == n,
               "sampling {} rows from logits {}", n, logits.shape_string());
  const int slot_index = ds.take_slot();
  DeviceSampling::Slot& slot = ds.slots[slot_index];

  const size_t rows_bytes = n * sizeof(kernels::SamplingRow);
  const size_t ids_bytes = n * sizeof(int32_t);
  const size_t workspace_bytes = kernels::sampling_workspace_bytes(n, vocab);
  if (!ds.copy_stream) PAGODA_CUDA_CHECK(cudaStreamCreateWithFlags(&ds.copy_stream, cudaStreamNonBlocking));
  // Buffers that grow are freed with cudaFree or cudaFreeHost, which wait for the device: a launch that grows them
  // waits for the step in flight. So they are made at once for the most rows a step samples (one a sequence, at
  // most max_num_seqs), not for the first steps' few. This slot's ids are not the placeholders' source (the other
  // slot's are), and its last copy was waited for.
  const size_t cap_rows = static_cast<size_t>(std::max(2 * n, m.options.max_num_seqs));
  if (slot.host.size() < rows_bytes + ids_bytes) {
    spdlog::debug("device sampling slot {} made for {} rows ({} to draw)", slot_index, cap_rows, n);
    slot.host = cuda::PinnedBuffer(cap_rows * (sizeof(kernels::SamplingRow) + sizeof(int32_t)));
  }
  if (slot.ids.size() < ids_bytes) slot.ids = cuda::DeviceBuffer(std::max(cap_rows, size_t{256}) * sizeof(int32_t));
  if (ds.rows.size() < rows_bytes) {
    ds.rows = cuda::DeviceBuffer(cap_rows * sizeof(kernels::SamplingRow));
    ds.uploaded.clear();
  }
  if (ds.workspace.size() < workspace_bytes) ds.workspace = cuda::DeviceBuffer(2 * workspace_bytes);

  auto* host_rows = static_cast<kernels::SamplingRow*>(slot.host.data());
  auto* host_ids = reinterpret_cast<int32_t*>(static_cast<char*>(slot.host.data()) + rows_bytes);
  for (int i = 0; i < n; ++i) {
    const DeviceSamplingRow& r = rows[i];
    host_rows[i] = r.temperature < kernels::kGreedyTemperatureBelow
                       ? kernels::SamplingRow{}  // greedy: nothing else matters, so steady decodes match
                       : kernels::SamplingRow{r.temperature, r.top_k, r.top_p, r.min_p, r.seed, r.offset};
  }
  auto* dev_rows = static_cast<kernels::SamplingRow*>(ds.rows.data());
  auto* dev_ids = static_cast<int32_t*>(slot.ids.data());
  static_assert(sizeof(kernels::SamplingRow) == 4 * sizeof(float) + 2 * sizeof(uint64_t),
                "no padding: rows are compared byte for byte");
  const bool same_rows = ds.uploaded.size() == static_cast<size_t>(n) &&
                         std::memcmp(ds.uploaded.data(), host_rows, rows_bytes) == 0;
  if (!same_rows) {
    PAGODA_CUDA_CHECK(cudaMemcpyAsync(dev_rows, host_rows, rows_bytes, cudaMemcpyHostToDevice, m.stream));
    ds.uploaded.assign(host_rows, host_rows + n);
  }
  kernels::sample_tokens(dev_ids, static_cast<const __nv_bfloat16*>(logits.data), dev_rows, n, vocab,
                         ds.workspace.data(), m.stream);
  PAGODA_CUDA_CHECK(cudaEventRecord(slot.sampled, m.stream));
  PAGODA_CUDA_CHECK(cudaStreamWaitEvent(ds.copy_stream, slot.sampled, 0));
  PAGODA_CUDA_CHECK(cudaMemcpyAsync(host_ids, dev_ids, ids_bytes, cudaMemcpyDeviceToHost, ds.copy_stream));
  PAGODA_CUDA_CHECK(cudaEventRecord(slot.done, ds.copy_stream));
  slot.outstanding = true;
  ds.latest = slot_index;
  ds.num_ids = n;
  return PendingSample{slot_index, n};
}

// A step that samples nothing: a slot's `done` event after its work, which wait_sample() waits for, so that the
// engine knows when the step ended. The latest samples (the placeholders' source) stay those of the last step
// that drew any: such a step's successor has no placeholders.
PendingSample CudaOps::enqueue_step_end() {
  DeviceSampling& ds = impl_->sampling;
  const int slot_index = ds.take_slot();
  DeviceSampling::Slot& slot = ds.slots[slot_index];
  PAGODA_CUDA_CHECK(cudaEventRecord(slot.done, impl_->stream));
  slot.outstanding = true;
  return PendingSample{slot_index, 0};
}

bool CudaOps::sample_ready(const PendingSample& pending) const {
  const DeviceSampling& ds = impl_->sampling;
  PAGODA_CHECK(pending.slot >= 0 && pending.slot < 2 && ds.slots[pending.slot].outstanding,
               "asking after a device sample that is not outstanding");
  const cudaError_t e = cudaEventQuery(ds.slots[pending.slot].done);
  if (e == cudaErrorNotReady) return false;
  PAGODA_CUDA_CHECK(e);
  return true;
}

void CudaOps::wait_sample(const PendingSample& pending, std::span<TokenId> out) {
  DeviceSampling& ds = impl_->sampling;
  PAGODA_CHECK(pending.slot >= 0 && pending.slot < 2 && ds.slots[pending.slot].outstanding,
               "waiting for a device sample that is not outstanding");
  PAGODA_CHECK(static_cast<int>(out.size()) == pending.num_rows, "{} ids for {} rows", out.size(), pending.num_rows);
  DeviceSampling::Slot& slot = ds.slots[pending.slot];
  slot.outstanding = false;
  PAGODA_CUDA_CHECK(cudaEventSynchronize(slot.done));
  if (pending.num_rows == 0) return;  // enqueue_step_end()
  const size_t rows_bytes = pending.num_rows * sizeof(kernels::SamplingRow);
  const auto* host_ids = reinterpret_cast<const int32_t*>(static_cast<const char*>(slot.host.data()) + rows_bytes);
  std::copy(host_ids, host_ids + pending.num_rows, out.begin());
}

}  // namespace pagoda
