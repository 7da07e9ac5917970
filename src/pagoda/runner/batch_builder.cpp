// Flattening sequence chunks into ForwardBatch arrays.
#include "pagoda/runner/batch_builder.h"

#include <algorithm>

#include "pagoda/core/check.h"

namespace pagoda {
namespace {
Tensor i32_view(std::vector<int32_t>& v) {
  return Tensor(v.data(), DType::kI32, {static_cast<int64_t>(v.size())});
}
}  // namespace

const ForwardBatch& BatchBuilder::build(std::span<const SequenceChunk> chunks, int block_size) {
  for (auto* v : {&token_ids_, &positions_, &query_start_, &token_seq_, &seq_lens_, &page_start_, &pages_, &slots_,
                  &logits_rows_, &from_prev_sample_})
    v->clear();
  int num_from_prev_sample = 0;
  query_start_.push_back(0);
  page_start_.push_back(0);
  int max_query_len = 0;
  int max_seq_len = 0;
  bool decode_only = true;
  int num_leading_decodes = 0;
  for (const SequenceChunk& c : chunks) {
    const int n = c.num_tokens();
    const int seq_len = c.start_position + n;
    PAGODA_CHECK(n > 0, "a sequence chunk without tokens");
    PAGODA_CHECK(static_cast<int64_t>(c.block_table.size()) * block_size >= seq_len,
                 "block table of {} blocks cannot hold {} tokens", c.block_table.size(), seq_len);
    const int row0 = static_cast<int>(token_ids_.size());
    for (int i = 0; i < n; ++i) {
      const int pos = c.start_position + i;
      const bool known = i < static_cast<int>(c.tokens.size());
      token_ids_.push_back(known ? c.tokens[i] : 0);
      from_prev_sample_.push_back(known ? -1 : c.prev_sample_row);
      num_from_prev_sample += known ? 0 : 1;
      token_seq_.push_back(static_cast<int32_t>(query_start_.size() - 1));
      positions_.push_back(pos);
      slots_.push_back(c.block_table[pos / block_size] * block_size + pos % block_size);
    }
    if (c.logits == LogitsWanted::kAll) {
      for (int i = 0; i < n; ++i) logits_rows_.push_back(row0 + i);
    } else if (c.logits == LogitsWanted::kLast) {
      logits_rows_.push_back(row0 + n - 1);
    }
    const int num_pages = (seq_len + block_size - 1) / block_size;
    pages_.insert(pages_.end(), c.block_table.begin(), c.block_table.begin() + num_pages);
    query_start_.push_back(static_cast<int32_t>(token_ids_.size()));
    page_start_.push_back(static_cast<int32_t>(pages_.size()));
    seq_lens_.push_back(seq_len);
    max_query_len = std::max(max_query_len, n);
    max_seq_len = std::max(max_seq_len, seq_len);
    decode_only = decode_only && n == 1;
    if (decode_only) ++num_leading_decodes;  // still only one-token sequences so far
  }
  batch_.token_ids = i32_view(token_ids_);
  batch_.positions = i32_view(positions_);
  batch_.query_start = i32_view(query_start_);
  batch_.token_seq = i32_view(token_seq_);
  batch_.seq_lens = i32_view(seq_lens_);
  batch_.kv_page_start = i32_view(page_start_);
  batch_.kv_pages = i32_view(pages_);
  batch_.slot_mapping = i32_view(slots_);
  batch_.logits_rows = i32_view(logits_rows_);
  batch_.token_from_prev_sample = i32_view(from_prev_sample_);
  batch_.num_tokens_from_prev_sample = num_from_prev_sample;
  batch_.num_seqs = static_cast<int>(chunks.size());
  batch_.num_tokens = static_cast<int>(token_ids_.size());
  batch_.max_query_len = max_query_len;
  batch_.max_seq_len = max_seq_len;
  batch_.decode_only = decode_only && !chunks.empty();
  batch_.num_leading_decodes = num_leading_decodes;
  return batch_;
}

const ForwardBatch& BatchBuilder::resolve_on_host(std::span<const TokenId> prev_sampled) {
  for (size_t i = 0; i < from_prev_sample_.size(); ++i) {
    const int32_t row = from_prev_sample_[i];
    if (row < 0) continue;
    PAGODA_CHECK(static_cast<size_t>(row) < prev_sampled.size(), "token {} reads row {} of {} samples", i, row,
                 prev_sampled.size());
    token_ids_[i] = prev_sampled[static_cast<size_t>(row)];
    from_prev_sample_[i] = -1;
  }
  batch_.num_tokens_from_prev_sample = 0;
  return batch_;
}

}  // namespace pagoda
