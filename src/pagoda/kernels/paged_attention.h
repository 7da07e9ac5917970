// Paged attention over the block KV cache, bf16 q/K/V with fp32 softmax and accumulation. Causal: query
// token i of sequence s (q_len = query_start[s+1] - query_start[s]) sits at position
// seq_lens[s] - q_len + i and sees keys [0, that position]. GQA: query head h reads KV head
// h / (num_heads / num_kv_heads). A sequence with seq_lens[s] == 0 is padding: its output rows are zero.
// Everything per-sequence is read from device memory, so a decode launch can be captured in a CUDA graph
// and replayed with new contents.
// FP8 KV (kv/kv_fp8.h): with k_fp8 set the caches hold e4m3 codes and a power-of-two exponent per (token,
// KV head) row; the kernels gather the codes (half the bytes) and convert them exactly to bf16: prefill
// into shared-memory tiles, computing as over a bf16 cache of those values bit for bit; decode in
// registers, straight into the MMA fragments, which sums Q K^T's products in another order (within one
// bf16 ulp of the bf16 kernel's output).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace pagoda::kernels {

struct PagedAttentionParams {
  __nv_bfloat16* out;            // [num_tokens, num_heads, head_dim]
  const __nv_bfloat16* q;        // [num_tokens, num_heads, head_dim]
  const __nv_bfloat16* k_cache;  // [num_blocks, block_size, num_kv_heads, head_dim]
  const __nv_bfloat16* v_cache;  // [num_blocks, block_size, num_kv_heads, head_dim]
  const uint8_t* k_fp8 = nullptr;  // FP8 KV instead of k_cache / v_cache: codes as above,
  const uint8_t* v_fp8 = nullptr;
  const int8_t* k_exp = nullptr;   // [num_blocks, num_kv_heads, block_size] exponents (KvCacheSpec::exponent_index)
  const int8_t* v_exp = nullptr;
  const int32_t* query_start;    // [num_seqs + 1]
  const int32_t* seq_lens;       // [num_seqs]
  const int32_t* kv_page_start;  // [num_seqs + 1] offsets into kv_pages
  const int32_t* kv_pages;       // block ids of every sequence, in order
  const int32_t* token_seq;      // [num_tokens] sequence of each token
  int num_seqs = 0;
  int num_tokens = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // any even value up to 256; 64 and 128 take the fast paths
  int block_size = 0;
  int max_query_len = 0;  // host-side bounds used to size grids
  int max_seq_len = 0;
  float scale = 1.0f;  // softmax scale, 1/sqrt(head_dim)
  // Decode: the blocks wanted an SM, which set the spans (and so the order in which the spans' partials add up); 0
  // for the KV dtype's own (decode_blocks_wanted_per_sm), else at most the larger dtype's (the workspace's bound). The tests
  // set it to compare FP8 KV with bf16 KV over the same spans.
  int decode_blocks_per_sm = 0;
};

// Variable-length queries (prefill chunks, mixed steps). Tensor-core tiles for head_dim 64/128, a plain
// fp32 kernel otherwise.
void paged_attention_prefill(const PagedAttentionParams& p, cudaStream_t stream);

// One query token per sequence (num_tokens == num_seqs). Split-K: the context is cut into partitions of
// kDecodePartitionTokens; while the batch leaves the GPU short of blocks each partition (or a run of a few)
// gets its own block, and the partial results are merged by log-sum-exp. Small partitions keep batch-1
// decode at long contexts spread over the whole GPU; large batches take long spans (often no merge). `num_splits` must be
// >= ceil(max_seq_len / kDecodePartitionTokens) for every sequence in the batch; partitions past a
// sequence's end do nothing (so a graph captured with the largest split count serves shorter contexts).
constexpr int kDecodePartitionTokens = 64;
int decode_num_splits(int max_seq_len);
// The decode blocks wanted an SM for a KV dtype when the params leave decode_blocks_per_sm at 0 (bf16 2, FP8 4).
int decode_blocks_wanted_per_sm(bool fp8_kv);
size_t paged_attention_decode_workspace_bytes(int num_seqs, int num_heads, int head_dim, int num_splits);
void paged_attention_decode(const PagedAttentionParams& p, int num_splits, void* workspace, cudaStream_t stream);

}  // namespace pagoda::kernels
