// StepInputs: a step's ForwardBatch arrays on the device. Every array sits at a fixed offset (its
// capacity) inside a pinned host buffer and one device buffer, so a step costs a single host-to-device
// copy and the device addresses stay the same from step to step (captured CUDA graphs read them). Two
// pinned buffers take turns: under async scheduling step N+1 is staged while step N's copy may still wait
// in the stream behind step N-1.
#pragma once

#include <cuda_runtime.h>

#include "pagoda/backend/cuda/device_memory.h"
#include "pagoda/backend/forward_batch.h"

namespace pagoda::cuda {

class StepInputs {
 public:
  StepInputs() = default;
  ~StepInputs();
  StepInputs(const StepInputs&) = delete;
  StepInputs& operator=(const StepInputs&) = delete;

  // Copies `host` to the device on `stream`, padded to `pad_to` sequences (>= host.num_seqs) with empty
  // one-token sequences (seq_len 0, slot -1: kernels write zeros and store nothing), and returns the
  // device batch. token_from_prev_sample is copied only when the host batch has such tokens (the device
  // batch keeps their count). Capacity grows when needed; that moves the arrays, and `*moved` is set so
  // that the caller can drop graphs that captured the old addresses.
  const ForwardBatch& stage(const ForwardBatch& host, int pad_to, cudaStream_t stream, bool* moved);

  // The device batch a padding-only decode step of `num_seqs` sequences would use (for graph capture).
  const ForwardBatch& stage_padding(int num_seqs, cudaStream_t stream, bool* moved);

  // Room for steps of up to `tokens` tokens, `seqs` sequences and `pages` block-table entries. Growing waits
  // for the stream and moves the arrays (`*moved` set).
  void reserve(int tokens, int seqs, int pages, cudaStream_t stream, bool* moved);

 private:
  // A pinned buffer and the event recorded after the last copy out of it.
  struct Staging {
    PinnedBuffer host;
    cudaEvent_t copied = nullptr;
  };

  size_t offset_of_pages() const;

  int cap_tokens_ = 0, cap_seqs_ = 0, cap_pages_ = 0;
  Staging staging_[2];
  int next_staging_ = 0;
  DeviceBuffer device_;
  ForwardBatch batch_;
};

}  // namespace pagoda::cuda
