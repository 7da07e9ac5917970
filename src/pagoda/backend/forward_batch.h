// ForwardBatch: one model step as flat, backend-neutral arrays. Sequences are laid out back to back in
// the token arrays; each sequence's KV lives in the pages listed by its block table (CSR form). Kernels
// see only these arrays: no sequence objects, no maps.
#pragma once

#include "pagoda/core/tensor.h"

namespace pagoda {

struct ForwardBatch {
  Tensor token_ids;      // [num_tokens] I32
  Tensor positions;      // [num_tokens] I32: position of each token in its sequence
  Tensor query_start;    // [num_seqs + 1] I32: offsets of each sequence's tokens in the token arrays
  Tensor token_seq;      // [num_tokens] I32: index of the sequence each token belongs to
  Tensor seq_lens;       // [num_seqs] I32: KV length of each sequence after this step (context + new)
  Tensor kv_page_start;  // [num_seqs + 1] I32: offsets into kv_pages
  Tensor kv_pages;       // [total_pages] I32: block ids, in order, for every sequence
  Tensor slot_mapping;   // [num_tokens] I32: cache slot (block * block_size + offset) for each new K/V
  Tensor logits_rows;    // [num_sampled] I32: token rows whose logits are needed
  // [num_tokens] I32. k >= 0: token i is row k of the previous step's sampled tokens, not known on the
  // host when this step was launched (async scheduling); the backend reads it there instead of
  // token_ids[i] (which holds 0). -1: token_ids[i] holds it.
  Tensor token_from_prev_sample;
  int num_tokens_from_prev_sample = 0;  // entries >= 0 above; 0: token_ids is complete
  int num_seqs = 0;
  int num_tokens = 0;
  int max_query_len = 0;
  int max_seq_len = 0;
  bool decode_only = false;  // every sequence contributes exactly one token
  // Sequences [0, num_leading_decodes) contribute one token each (the scheduler puts running decodes
  // first): a backend may run their attention with its decode kernel and the rest as prefill.
  int num_leading_decodes = 0;
};

}  // namespace pagoda
