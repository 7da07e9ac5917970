// BatchBuilder: flattens one step's per-sequence work (which tokens, at which positions, over which KV
// blocks) into a ForwardBatch of host arrays. The scheduler decides; this only lays out.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "pagoda/backend/forward_batch.h"
#include "pagoda/core/types.h"

namespace pagoda {

enum class LogitsWanted { kNone, kLast, kAll };

struct SequenceChunk {
  std::span<const TokenId> tokens;       // the tokens computed this step
  int start_position = 0;                // positions of tokens[0] (= tokens already in the KV cache)
  std::span<const int32_t> block_table;  // KV blocks of the sequence, covering start_position + size
  LogitsWanted logits = LogitsWanted::kLast;
};

class BatchBuilder {
 public:
  // The returned batch points into this builder's arrays: valid until the next build().
  const ForwardBatch& build(std::span<const SequenceChunk> chunks, int block_size);

 private:
  std::vector<int32_t> token_ids_, positions_, query_start_, token_seq_, seq_lens_, page_start_, pages_, slots_,
      logits_rows_;
  ForwardBatch batch_;
};

}  // namespace pagoda
