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
  std::span<const TokenId> tokens;       // the tokens computed this step whose ids are known
  int start_position = 0;                // positions of tokens[0] (= tokens already in the KV cache)
  std::span<const int32_t> block_table;  // KV blocks of the sequence, covering the chunk
  LogitsWanted logits = LogitsWanted::kLast;
  // >= 0: one more token after `tokens`, row k of the previous step's sampled tokens (its id is not
  // known on the host yet: async scheduling).
  int prev_sample_row = -1;

  int num_tokens() const { return static_cast<int>(tokens.size()) + (prev_sample_row >= 0 ? 1 : 0); }
};

class BatchBuilder {
 public:
  // The returned batch points into this builder's arrays: valid until the next build().
  const ForwardBatch& build(std::span<const SequenceChunk> chunks, int block_size);
  // Writes the previous step's sampled ids (known on the host after all) into the built batch's
  // token_ids, so that it no longer reads any from the device.
  const ForwardBatch& resolve_on_host(std::span<const TokenId> prev_sampled);

 private:
  std::vector<int32_t> token_ids_, positions_, query_start_, token_seq_, seq_lens_, page_start_, pages_, slots_,
      logits_rows_, from_prev_sample_;
  ForwardBatch batch_;
};

}  // namespace pagoda
