// Layout, padding and the one copy per step.
#include "pagoda/backend/cuda/step_inputs.h"

#include <algorithm>
#include <cstring>

#include "pagoda/core/logging.h"
#include "pagoda/kernels/cuda_check.h"

namespace pagoda::cuda {
namespace {

// Array order in both buffers; kv_pages last so a step copies only the prefix it uses.
enum Slot {
  kTokenIds, kPositions, kTokenSeq, kSlots, kFromPrevSample, kLogitsRows, kQueryStart, kSeqLens, kPageStart, kPages
};

}  // namespace

StepInputs::~StepInputs() {
  for (Staging& s : staging_)
    if (s.copied) cudaEventDestroy(s.copied);
}

size_t StepInputs::offset_of_pages() const {
  return (6 * static_cast<size_t>(cap_tokens_) + 3 * static_cast<size_t>(cap_seqs_) + 2) * sizeof(int32_t);
}

void StepInputs::reserve(int tokens, int seqs, int pages, cudaStream_t stream, bool* moved) {
  if (tokens <= cap_tokens_ && seqs <= cap_seqs_ && pages <= cap_pages_) return;
  // Growing waits for the device (the old buffers' copies) and moves the buffers the graphs read.
  spdlog::debug("step inputs grow for {} tokens, {} sequences, {} pages (held {}, {}, {})", tokens, seqs, pages,
                cap_tokens_, cap_seqs_, cap_pages_);
  cap_tokens_ = std::max({tokens, 2 * cap_tokens_, 256});
  cap_seqs_ = std::max({seqs, 2 * cap_seqs_, 256});
  cap_pages_ = std::max({pages, 2 * cap_pages_, 4096});
  const size_t bytes = offset_of_pages() + static_cast<size_t>(cap_pages_) * sizeof(int32_t);
  PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream));  // copies out of the old buffers are done
  for (Staging& s : staging_) {
    s.host = PinnedBuffer(bytes);
    if (!s.copied) PAGODA_CUDA_CHECK(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
  }
  device_ = DeviceBuffer(bytes);
  *moved = true;
}

const ForwardBatch& StepInputs::stage(const ForwardBatch& host, int pad_to, cudaStream_t stream, bool* moved) {
  const int n = host.num_seqs, seqs = std::max(pad_to, n);
  const int pad = seqs - n;
  const int tokens = host.num_tokens + pad;
  const int rows = static_cast<int>(host.logits_rows.dim(0)) + pad;
  const int pages = static_cast<int>(host.kv_pages.dim(0));
  reserve(tokens, seqs, pages, stream, moved);

  // This buffer was last copied from two steps ago; that copy is long done unless steps pile up.
  Staging& staging = staging_[next_staging_];
  next_staging_ ^= 1;
  PAGODA_CUDA_CHECK(cudaEventSynchronize(staging.copied));
  auto* h = static_cast<int32_t*>(staging.host.data());
  auto* d = static_cast<int32_t*>(device_.data());
  const int64_t ct = cap_tokens_, cs = cap_seqs_;
  const int64_t offsets[] = {0, ct, 2 * ct, 3 * ct, 4 * ct, 5 * ct, 6 * ct, 6 * ct + cs + 1, 6 * ct + 2 * cs + 1,
                             static_cast<int64_t>(offset_of_pages() / sizeof(int32_t))};
  // Copies `count` host values into slot s, then appends `extra` values of `fill` (or i + base).
  auto put = [&](Slot s, const Tensor& src, int count) {
    if (count > 0) std::memcpy(h + offsets[s], src.data, static_cast<size_t>(count) * sizeof(int32_t));
    return h + offsets[s];
  };
  int32_t* ids = put(kTokenIds, host.token_ids, host.num_tokens);
  int32_t* pos = put(kPositions, host.positions, host.num_tokens);
  int32_t* tseq = put(kTokenSeq, host.token_seq, host.num_tokens);
  int32_t* slots = put(kSlots, host.slot_mapping, host.num_tokens);
  if (host.num_tokens_from_prev_sample > 0) put(kFromPrevSample, host.token_from_prev_sample, host.num_tokens);
  int32_t* lrows = put(kLogitsRows, host.logits_rows, rows - pad);
  int32_t* qstart = put(kQueryStart, host.query_start, n + 1);
  int32_t* lens = put(kSeqLens, host.seq_lens, n);
  int32_t* pstart = put(kPageStart, host.kv_page_start, n + 1);
  put(kPages, host.kv_pages, pages);
  for (int i = 0; i < pad; ++i) {  // empty one-token sequences
    const int t = host.num_tokens + i;
    ids[t] = 0;
    pos[t] = 0;
    tseq[t] = n + i;
    slots[t] = -1;
    lrows[rows - pad + i] = t;
    qstart[n + i + 1] = t + 1;
    lens[n + i] = 0;
    pstart[n + i + 1] = pstart[n];
  }
  const size_t used = offsets[kPages] * sizeof(int32_t) + static_cast<size_t>(pages) * sizeof(int32_t);
  PAGODA_CUDA_CHECK(cudaMemcpyAsync(d, h, used, cudaMemcpyHostToDevice, stream));
  PAGODA_CUDA_CHECK(cudaEventRecord(staging.copied, stream));

  auto view = [&](Slot s, int64_t count) { return Tensor(d + offsets[s], DType::kI32, {count}, Device::kCuda); };
  batch_ = ForwardBatch{};
  batch_.token_ids = view(kTokenIds, tokens);
  batch_.positions = view(kPositions, tokens);
  batch_.token_seq = view(kTokenSeq, tokens);
  batch_.slot_mapping = view(kSlots, tokens);
  batch_.token_from_prev_sample = view(kFromPrevSample, tokens);
  batch_.num_tokens_from_prev_sample = host.num_tokens_from_prev_sample;
  batch_.logits_rows = view(kLogitsRows, rows);
  batch_.query_start = view(kQueryStart, seqs + 1);
  batch_.seq_lens = view(kSeqLens, seqs);
  batch_.kv_page_start = view(kPageStart, seqs + 1);
  batch_.kv_pages = view(kPages, pages);
  batch_.num_seqs = seqs;
  batch_.num_tokens = tokens;
  batch_.max_query_len = std::max(host.max_query_len, pad > 0 ? 1 : 0);
  batch_.max_seq_len = host.max_seq_len;
  batch_.decode_only = host.decode_only || (n == 0 && pad > 0);
  batch_.num_leading_decodes = batch_.decode_only ? seqs : host.num_leading_decodes;
  return batch_;
}

const ForwardBatch& StepInputs::stage_padding(int num_seqs, cudaStream_t stream, bool* moved) {
  static const int32_t zero = 0;
  ForwardBatch empty;
  empty.token_ids = empty.positions = empty.token_seq = empty.slot_mapping = empty.logits_rows = empty.seq_lens =
      empty.kv_pages = empty.token_from_prev_sample = Tensor(const_cast<int32_t*>(&zero), DType::kI32, {0});
  empty.query_start = empty.kv_page_start = Tensor(const_cast<int32_t*>(&zero), DType::kI32, {1});
  empty.decode_only = true;
  return stage(empty, num_seqs, stream, moved);
}

}  // namespace pagoda::cuda
