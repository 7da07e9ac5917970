// Paged attention for decode steps (one query token per sequence), head_dim 64 and 128 (others go to
// paged_attention_generic.cu). attend_span: one block = one span of keys x one KV head x one sequence. The
// query heads of the GQA group are the 16 rows of the MMA, so K/V are read once per group. Each 64-key
// chunk (cp.async pipeline of 2, 3 or 6 stages) is split between the 4 warps, 16 keys each; the warps
// merge in shared memory at the end. Two ways to combine the spans of a sequence:
//  - decode_cluster_kernel (sm_90, small batches with long contexts): the spans of a (sequence, KV head)
//    are the C = 8 or 16 blocks of a thread-block cluster, which merge through distributed shared memory;
//  - decode_tc_kernel + decode_merge_kernel: a span is a whole number of kDecodePartitionTokens
//    partitions; a block that holds all of a sequence's keys writes the output, otherwise each writes
//    (max, sum, unnormalised acc) to the workspace and the merge kernel combines them (log-sum-exp). A span
//    is one partition unless the batch alone fills the GPU (see decode_spans): a graph captured with many
//    splits then does not launch thousands of blocks that find no keys.
#include <cooperative_groups.h>

#include <cstdlib>
#include <string_view>

#include "pagoda/kernels/paged_attention_common.cuh"

namespace pagoda::kernels {
using namespace attention;
namespace cg = cooperative_groups;
namespace {

// ---------------------------------------------------------------------------------------------------
// Decode, tensor cores. grid = (num_spans, num_kv_heads * ceil(group / 16), num_seqs), 128 threads; block
// x covers keys [x * span, (x + 1) * span). Workspace (num_spans > 1): acc [num_seqs, num_heads,
// num_spans, D] fp32, then ml [num_seqs, num_heads, num_spans] float2 (running max in log2 units, sum of
// exp2). num_spans <= num_splits, so paged_attention_decode_workspace_bytes covers it.
//
// The span is the host's (graph-safe) unless the sequence is long: past kDecodeLongContext keys a block
// takes at least kDecodeLongSpan of them, so half as many blocks do twice the work each and the merge reads
// half as many partials. Batch 1 on the H200 (Llama-3-8B, graph split for 4,096 keys): 64-key spans are
// faster at 128 keys of context (4.29 vs 4.35 ms a step), 128-key spans at 2,048 (4.45 vs 4.55 ms).
constexpr int kDecodeLongContext = 512;
constexpr int kDecodeLongSpan = 2 * kDecodePartitionTokens;
__device__ __forceinline__ int sequence_span(int seq_len, int span) {
  return seq_len > kDecodeLongContext ? max(span, kDecodeLongSpan) : span;
}
template <int D>
constexpr size_t decode_stage_elems() {
  return static_cast<size_t>(2) * kTileK * tile_ld<D>();  // K and V of one chunk
}
template <int D>
constexpr int decode_red_ld() {
  return D + 4;
}
template <int D>
constexpr size_t decode_red_bytes() {  // cross-warp merge buffers, aliasing the pipeline stages
  return (static_cast<size_t>(kWarps) * kDecodeRows * decode_red_ld<D>() + 3 * kWarps * kDecodeRows +
          2 * kDecodeRows) * sizeof(float);
}
template <int D, int kStages>
constexpr size_t decode_smem_bytes() {
  return (static_cast<size_t>(kDecodeRows) * tile_ld<D>() + kStages * decode_stage_elems<D>()) * sizeof(bf16);
}

// Shared-memory views of a block's result after attend_span: each warp's unnormalised accumulator, its
// weight relative to the block's running max, and the block's max (log2 units) and sum of exp2 per row.
template <int D>
struct SpanResult {
  float* red_o;  // [kWarps][kDecodeRows][decode_red_ld<D>()]
  float* red_m;  // [kWarps][kDecodeRows]
  float* red_l;  // [kWarps][kDecodeRows]
  float* red_w;  // [kWarps][kDecodeRows]
  float* row_m;  // [kDecodeRows]
  float* row_l;  // [kDecodeRows]
};
// The buffers alias the pipeline stages, which are free once the keys are done.
template <int D>
__device__ __forceinline__ SpanResult<D> span_result(unsigned char* smem_raw) {
  float* red_o = reinterpret_cast<float*>(reinterpret_cast<bf16*>(smem_raw) + kDecodeRows * tile_ld<D>());
  float* red_m = red_o + kWarps * kDecodeRows * decode_red_ld<D>();
  float* red_l = red_m + kWarps * kDecodeRows;
  float* red_w = red_l + kWarps * kDecodeRows;
  float* row_m = red_w + kWarps * kDecodeRows;
  return {red_o, red_m, red_l, red_w, row_m, row_m + kDecodeRows};
}
// The block's unnormalised accumulator of `row`, dims d and d + 1: its warps' sums, weighted.
template <int D>
__device__ __forceinline__ float2 span_acc(const SpanResult<D>& r, int row, int d) {
  float2 acc = make_float2(0.0f, 0.0f);
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const float wt = r.red_w[w * kDecodeRows + row];
    const float2 v = *reinterpret_cast<const float2*>(r.red_o + (w * kDecodeRows + row) * decode_red_ld<D>() + d);
    acc.x += wt * v.x;
    acc.y += wt * v.y;
  }
  return acc;
}

// Attends query heads head0 .. head0 + rows - 1 of token `token` (sequence s, KV head kvh) to keys
// [k_begin, k_end), k_begin < k_end. Each 64-key chunk is split between the 4 warps, 16 keys each; the
// warps' results are left in shared memory (SpanResult), synchronised.
template <int D, int kStages>
__device__ __forceinline__ SpanResult<D> attend_span(const PagedAttentionParams& p, unsigned char* smem_raw, int s,
                                                     int kvh, int head0, int rows, int token, int k_begin,
                                                     int k_end) {
  constexpr int kLd = tile_ld<D>();
  static_assert(decode_red_bytes<D>() <= kStages * decode_stage_elems<D>() * sizeof(bf16),
                "merge buffers fit in the stages");
  bf16* qs = reinterpret_cast<bf16*>(smem_raw);  // [16][kLd]
  bf16* stages = qs + kDecodeRows * kLd;         // [kStages][K, V][kTileK][kLd]
  const int n_chunks = (k_end - k_begin + kTileK - 1) / kTileK;
  const int32_t* pages = p.kv_pages + p.kv_page_start[s];
  auto stage_k = [&](int i) { return stages + (i % kStages) * decode_stage_elems<D>(); };
  auto stage_v = [&](int i) { return stage_k(i) + kTileK * kLd; };

  load_q_tile<D, kDecodeRows>(qs, p.q + (static_cast<int64_t>(token) * p.num_heads + head0) * D, D, rows);
#pragma unroll
  for (int c = 0; c < kStages - 1; ++c) {  // Q rides in group 0 with chunk 0
    if (c < n_chunks) load_kv_tile<D>(stage_k(c), stage_v(c), p, pages, kvh, k_begin + c * kTileK, k_end);
    cp_async_commit();
  }
  cp_async_wait<kStages - 2>();
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  uint32_t qf[D / 16][4];
  load_q_frags<D>(qf, qs, lane);
  const float scale = p.scale * kLog2e;
  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  for (int j = 0; j < n_chunks; ++j) {
    const int next = j + kStages - 1;  // its stage was last read in iteration j - 1
    if (next < n_chunks) load_kv_tile<D>(stage_k(next), stage_v(next), p, pages, kvh, k_begin + next * kTileK, k_end);
    cp_async_commit();  // always, so that group j + 1 is complete after the wait below
    const int key0 = k_begin + j * kTileK + warp * 16;  // this warp's 16 keys of the chunk
    if (key0 < k_end) {
      float sc[2][4];
      qk_tile<D, 2>(sc, qf, stage_k(j) + warp * 16 * kLd, lane);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + nt * 8 + 2 * t + (e & 1);
          sc[nt][e] = key < k_end ? sc[nt][e] * scale : -INFINITY;
        }
      }
      online_softmax<2, D / 8>(sc, m, l, o);
      pv_tile<D, 2>(o, sc, stage_v(j) + warp * 16 * kLd, lane);
    }
    cp_async_wait<kStages - 2>();
    __syncthreads();
  }
  cp_async_wait<0>();  // only empty groups can be pending; the stages are free after this barrier
  __syncthreads();

  // Merge the four warps: each warp's max and sum per row, then the block's and each warp's weight.
  const SpanResult<D> r = span_result<D>(smem_raw);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = g + 8 * i;
    const float sum = quad_sum(l[i]);
    if (t == 0) {
      r.red_m[warp * kDecodeRows + row] = m[i];
      r.red_l[warp * kDecodeRows + row] = sum;
    }
    float* dst = r.red_o + (warp * kDecodeRows + row) * decode_red_ld<D>();
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      *reinterpret_cast<float2*>(dst + dt * 8 + 2 * t) = make_float2(o[dt][2 * i], o[dt][2 * i + 1]);
    }
  }
  __syncthreads();
  if (threadIdx.x < kDecodeRows) {
    const int row = threadIdx.x;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, r.red_m[w * kDecodeRows + row]);
    const float m_ref = mx == -INFINITY ? 0.0f : mx;
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float wt = exp2f(r.red_m[w * kDecodeRows + row] - m_ref);
      r.red_w[w * kDecodeRows + row] = wt;
      sum += r.red_l[w * kDecodeRows + row] * wt;
    }
    r.row_m[row] = mx;
    r.row_l[row] = sum;
  }
  __syncthreads();
  return r;
}

// Which query heads a decode block serves: blockIdx.y = KV head * row tiles + row tile.
struct DecodeHeads {
  int kvh, head0, rows;
};
__device__ __forceinline__ DecodeHeads decode_heads(const PagedAttentionParams& p) {
  const int group = p.num_heads / p.num_kv_heads;
  const int row_tiles = (group + kDecodeRows - 1) / kDecodeRows;
  const int kvh = blockIdx.y / row_tiles;
  const int head0 = kvh * group + (blockIdx.y % row_tiles) * kDecodeRows;  // query head of row 0
  return {kvh, head0, min(kDecodeRows, (kvh + 1) * group - head0)};
}

// Writes rows x D of bf16 zeros (a padding sequence's output).
template <int D>
__device__ __forceinline__ void write_zeros(bf16* out, int rows) {
  for (int i = threadIdx.x; i < rows * (D / 2); i += kThreads) reinterpret_cast<uint32_t*>(out)[i] = 0u;
}

// The output of a block that held every key of its sequence.
template <int D>
__device__ __forceinline__ void write_whole_sequence(bf16* out, const SpanResult<D>& r, int rows) {
  for (int i = threadIdx.x; i < rows * (D / 2); i += kThreads) {
    const int row = i / (D / 2), d = (i % (D / 2)) * 2;
    const float2 acc = span_acc<D>(r, row, d);
    const float inv = r.row_l[row] > 0.0f ? 1.0f / r.row_l[row] : 0.0f;
    reinterpret_cast<uint32_t*>(out + row * D)[d / 2] = pack_bf16x2(acc.x * inv, acc.y * inv);
  }
}

template <int D, int kStages>
__global__ void __launch_bounds__(kThreads, 2)
    decode_tc_kernel(const __grid_constant__ PagedAttentionParams p, int span, float* ws_acc, float2* ws_ml) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int split = blockIdx.x;
  const int num_spans = gridDim.x;
  const int s = blockIdx.z;
  const DecodeHeads h = decode_heads(p);
  const int token = p.query_start[s];
  const int seq_len = p.seq_lens[s];
  span = sequence_span(seq_len, span);
  const int k_begin = split * span;
  bf16* out = p.out + (static_cast<int64_t>(token) * p.num_heads + h.head0) * D;  // row r at out + r * D
  if (k_begin >= seq_len) {  // span past the end; with one span this is a padding sequence
    if (num_spans == 1) write_zeros<D>(out, h.rows);
    return;
  }
  const int k_end = min(seq_len, k_begin + span);
  const SpanResult<D> r = attend_span<D, kStages>(p, smem_raw, s, h.kvh, h.head0, h.rows, token, k_begin, k_end);
  if (k_begin == 0 && k_end == seq_len) {  // one block holds every key: no merge
    write_whole_sequence<D>(out, r, h.rows);
    return;
  }
  for (int i = threadIdx.x; i < h.rows * (D / 2); i += kThreads) {
    const int row = i / (D / 2), d = (i % (D / 2)) * 2;
    const int64_t part = (static_cast<int64_t>(s) * p.num_heads + h.head0 + row) * num_spans + split;
    *reinterpret_cast<float2*>(ws_acc + part * D + d) = span_acc<D>(r, row, d);
    if (d == 0) ws_ml[part] = make_float2(r.row_m[row], r.row_l[row]);
  }
}

// Decode with the spans of a (sequence, KV head row tile) in one thread-block cluster of C blocks (sm_90):
// the blocks share the sequence's keys in whole 64-key tiles and merge through distributed shared memory,
// so there is no workspace round trip and no merge kernel. grid = (C, num_kv_heads * row_tiles, num_seqs),
// clusters (C, 1, 1). Block `rank` writes dims [rank * D / C, (rank + 1) * D / C) of every row.
template <int D, int C, int kStages>
__global__ void __launch_bounds__(kThreads, 2) decode_cluster_kernel(const __grid_constant__ PagedAttentionParams p) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static_assert(D % (2 * C) == 0, "each block writes whole pairs of dims");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int s = blockIdx.z;
  const DecodeHeads h = decode_heads(p);
  const int token = p.query_start[s];
  const int seq_len = p.seq_lens[s];
  bf16* out = p.out + (static_cast<int64_t>(token) * p.num_heads + h.head0) * D;
  const int span = ((max(seq_len, 1) + C - 1) / C + kTileK - 1) / kTileK * kTileK;  // whole tiles, C blocks
  const int active = seq_len > 0 ? (seq_len + span - 1) / span : 0;  // blocks with keys: 0 .. active - 1
  if (active <= 1) {  // the same for every block of the cluster, so no block waits at a barrier
    if (rank != 0) return;
    if (active == 0) {
      write_zeros<D>(out, h.rows);
    } else {
      write_whole_sequence<D>(out, attend_span<D, kStages>(p, smem_raw, s, h.kvh, h.head0, h.rows, token, 0, seq_len),
                              h.rows);
    }
    return;
  }
  const int k_begin = rank * span;
  SpanResult<D> r = span_result<D>(smem_raw);
  if (rank < active) {
    r = attend_span<D, kStages>(p, smem_raw, s, h.kvh, h.head0, h.rows, token, k_begin, min(seq_len, k_begin + span));
    // The block's sum over its warps, in place of warp 0's accumulator (each element read and written by
    // one thread).
    for (int i = threadIdx.x; i < h.rows * (D / 2); i += kThreads) {
      const int row = i / (D / 2), d = (i % (D / 2)) * 2;
      const float2 acc = span_acc<D>(r, row, d);
      *reinterpret_cast<float2*>(r.red_o + row * decode_red_ld<D>() + d) = acc;
    }
  } else if (threadIdx.x < kDecodeRows) {
    r.row_m[threadIdx.x] = -INFINITY;
    r.row_l[threadIdx.x] = 0.0f;
  }
  cluster.sync();  // every block's result is visible to the cluster
  constexpr int kPairs = D / C / 2;  // pairs of dims this block writes per row
  for (int i = threadIdx.x; i < h.rows * kPairs; i += kThreads) {
    const int row = i / kPairs, d = rank * (D / C) + (i % kPairs) * 2;
    float m[C], l[C];
    float2 v[C];
#pragma unroll
    for (int c = 0; c < C; ++c) {  // all remote loads in flight before any is used
      m[c] = cluster.map_shared_rank(r.row_m, c)[row];
      l[c] = cluster.map_shared_rank(r.row_l, c)[row];
      v[c] = *reinterpret_cast<const float2*>(cluster.map_shared_rank(r.red_o, c) + row * decode_red_ld<D>() + d);
    }
    float mx = -INFINITY;
#pragma unroll
    for (int c = 0; c < C; ++c) mx = fmaxf(mx, m[c]);
    float sum = 0.0f;
    float2 acc = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int c = 0; c < C; ++c) {
      if (m[c] == -INFINITY) continue;  // a block without keys (its accumulator was never written)
      const float wt = exp2f(m[c] - mx);
      sum += l[c] * wt;
      acc.x += wt * v[c].x;
      acc.y += wt * v[c].y;
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    reinterpret_cast<uint32_t*>(out + row * D)[d / 2] = pack_bf16x2(acc.x * inv, acc.y * inv);
  }
  cluster.sync();  // no block leaves while another may still read its shared memory
#endif
}

// Combines the spans of one (sequence, head). grid = (num_heads, num_seqs), D / 2 threads.
template <int D>
__global__ void __launch_bounds__(D / 2)
    decode_merge_kernel(const __grid_constant__ PagedAttentionParams p, int num_spans, int span, const float* ws_acc,
                        const float2* ws_ml) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  const int h = blockIdx.x;
  const int s = blockIdx.y;
  const int seq_len = p.seq_lens[s];
  span = sequence_span(seq_len, span);
  // Spans that hold keys; the others were never written.
  const int n = min(num_spans, (max(seq_len, 0) + span - 1) / span);
  if (n == 1) return;  // its one block wrote the output
  const int64_t part0 = (static_cast<int64_t>(s) * p.num_heads + h) * num_spans;
  bf16* out = p.out + (static_cast<int64_t>(p.query_start[s]) * p.num_heads + h) * D;
  // Batches of kMergeBatch spans, whose loads are all issued before any is used (a long chain of
  // dependent loads is what a small merge waits on): the batch's maximum, then its weighted sums, folded
  // into the running ones. Up to kMergeBatch spans this is the two-pass merge, with the same roundings.
  constexpr int kMergeBatch = 16;
  const int d = threadIdx.x * 2;
  float mx = -INFINITY, sum = 0.0f;
  float2 acc = make_float2(0.0f, 0.0f);
  for (int base = 0; base < n; base += kMergeBatch) {
    float2 ml[kMergeBatch], v[kMergeBatch];
#pragma unroll
    for (int i = 0; i < kMergeBatch; ++i) {
      if (base + i < n) {
        ml[i] = ws_ml[part0 + base + i];
        v[i] = *reinterpret_cast<const float2*>(ws_acc + (part0 + base + i) * D + d);
      } else {
        ml[i] = make_float2(-INFINITY, 0.0f);
        v[i] = make_float2(0.0f, 0.0f);
      }
    }
    float batch_mx = mx;
#pragma unroll
    for (int i = 0; i < kMergeBatch; ++i) batch_mx = fmaxf(batch_mx, ml[i].x);
    if (base > 0) {  // rescale the spans before this batch (the first batch has none)
      const float old = exp2f(mx - batch_mx);
      sum *= old;
      acc.x *= old;
      acc.y *= old;
    }
    mx = batch_mx;
#pragma unroll
    for (int i = 0; i < kMergeBatch; ++i) {
      const float wt = exp2f(ml[i].x - mx);  // 0 for the padding entries (mx is finite: span 0 has keys)
      sum += ml[i].y * wt;
      acc.x += wt * v[i].x;
      acc.y += wt * v[i].y;
    }
  }
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;  // n == 0 (padding): zeros
  reinterpret_cast<uint32_t*>(out)[threadIdx.x] = pack_bf16x2(acc.x * inv, acc.y * inv);
}


// Decode work split: `num_spans` blocks per (sequence, KV head row tile), each covering `span` keys (a
// whole number of partitions). One partition per block when the batch leaves the GPU idle; when the
// batch alone makes about 4 blocks per SM, fewer and longer spans (often one: no merge), so that a graph
// captured with the largest split count does not launch blocks past every sequence's end. Depends on
// host values only (graph-safe). Coverage, for the longest sequence the split count allows (L = num_splits
// * kDecodePartitionTokens keys): sequences up to kDecodeLongContext keys take `span`-key blocks, longer
// ones blocks of sequence_span(), so num_spans is the larger of the two counts they need. (A graph for
// 4,096 keys at batch 1 launches 32 blocks a head instead of 64: at 2 blocks an SM, one wave.)
struct DecodeSpans {
  int num_spans, span;
};
DecodeSpans decode_spans(int num_splits, int blocks_per_span) {
  const int target_blocks = decode_target_blocks();
  const int wanted = std::max(1, (target_blocks + blocks_per_span - 1) / blocks_per_span);
  const int parts_per_span = (num_splits + std::min(num_splits, wanted) - 1) / std::min(num_splits, wanted);
  const int span = parts_per_span * kDecodePartitionTokens;
  const int64_t longest = static_cast<int64_t>(num_splits) * kDecodePartitionTokens;
  const auto spans_for = [](int64_t keys, int span_keys) { return static_cast<int>((keys + span_keys - 1) / span_keys); };
  const int num_spans = std::max(spans_for(std::min<int64_t>(longest, kDecodeLongContext), span),
                                 spans_for(longest, std::max(span, kDecodeLongSpan)));
  return {num_spans, span};
}

template <int D, int kStages>
void launch_decode_blocks(const PagedAttentionParams& p, dim3 grid, int span, float* ws_acc, float2* ws_ml,
                          cudaStream_t stream) {
  static std::atomic<uint64_t> configured{0};
  constexpr size_t smem = decode_smem_bytes<D, kStages>();
  allow_smem(decode_tc_kernel<D, kStages>, smem, configured);
  launch_kernel("paged_attention_decode (tensor cores)", decode_tc_kernel<D, kStages>, grid, kThreads, smem, stream, p,
                span, ws_acc, ws_ml);
}

// Clusters of C blocks for one decode launch, or 0 for the two-kernel path: on sm_90 and newer (unless
// turned off), when the two-kernel path would split sequences into at least 8 spans, if clusters of that
// size with this kernel's shared memory fit on the device (16 is beyond the portable limit of 8).
std::atomic<bool> g_decode_clusters{std::getenv("PAGODA_NO_DECODE_CLUSTERS") == nullptr ||
                                    std::string_view(std::getenv("PAGODA_NO_DECODE_CLUSTERS")) != "1"};
constexpr int kClusterStages = kDecodeStagesWide;  // two blocks an SM, so a cluster fits in a GPC

template <int D, int C>
bool cluster_fits() {
  static std::atomic<int> cached[64] = {};  // per device: 0 unknown, 1 fits, 2 does not
  int device = 0;
  PAGODA_CUDA_CHECK(cudaGetDevice(&device));
  int state = cached[device & 63].load(std::memory_order_relaxed);
  if (state == 0) {
    int major = 0;
    PAGODA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    bool fits = false;
    constexpr size_t smem = decode_smem_bytes<D, kClusterStages>();
    if (major >= 9 && smem <= static_cast<size_t>(device_limits().max_smem_per_block)) {
      auto* kernel = decode_cluster_kernel<D, C, kClusterStages>;
      PAGODA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
      if (C > 8) PAGODA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      cudaLaunchConfig_t config = {};
      config.gridDim = dim3(C, 1, 1);
      config.blockDim = dim3(kThreads);
      config.dynamicSmemBytes = smem;
      cudaLaunchAttribute attribute[1];
      attribute[0].id = cudaLaunchAttributeClusterDimension;
      attribute[0].val.clusterDim.x = C;
      attribute[0].val.clusterDim.y = 1;
      attribute[0].val.clusterDim.z = 1;
      config.attrs = attribute;
      config.numAttrs = 1;
      int clusters = 0;
      fits = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) == cudaSuccess && clusters > 0;
      cudaGetLastError();  // an unsupported query is an answer, not an error
    }
    state = fits ? 1 : 2;
    cached[device & 63].store(state, std::memory_order_relaxed);
  }
  return state == 1;
}

template <int D>
int decode_cluster_size(int num_spans) {
  if (!g_decode_clusters.load(std::memory_order_relaxed) || num_spans < 8) return 0;
  if (num_spans >= 16 && cluster_fits<D, 16>()) return 16;
  return cluster_fits<D, 8>() ? 8 : 0;
}

template <int D, int C>
void launch_decode_clusters(const PagedAttentionParams& p, dim3 grid, cudaStream_t stream) {
  launch_kernel_in_clusters("paged_attention_decode (clusters)", C, decode_cluster_kernel<D, C, kClusterStages>,
                            grid, kThreads, decode_smem_bytes<D, kClusterStages>(), stream, p);
}

template <int D>
void launch_decode_tc(const PagedAttentionParams& p, int num_splits, void* workspace, cudaStream_t stream) {
  const int group = p.num_heads / p.num_kv_heads;
  const int row_tiles = (group + kDecodeRows - 1) / kDecodeRows;
  const DecodeSpans spans = decode_spans(num_splits, p.num_kv_heads * row_tiles * p.num_seqs);
  const int cluster = decode_cluster_size<D>(spans.num_spans);
  if (cluster > 0) {
    const dim3 grid(cluster, p.num_kv_heads * row_tiles, p.num_seqs);
    if (cluster == 16) {
      launch_decode_clusters<D, 16>(p, grid, stream);
    } else {
      launch_decode_clusters<D, 8>(p, grid, stream);
    }
    return;
  }
  float* ws_acc = static_cast<float*>(workspace);
  float2* ws_ml = nullptr;
  if (spans.num_spans > 1) {
    if (workspace == nullptr) throw_cuda_error(cudaErrorInvalidValue, "paged_attention_decode: no workspace", __FILE__, __LINE__);
    ws_ml = reinterpret_cast<float2*>(ws_acc + static_cast<size_t>(p.num_seqs) * p.num_heads * spans.num_spans * D);
  }
  const dim3 grid(spans.num_spans, p.num_kv_heads * row_tiles, p.num_seqs);
  const DeviceLimits limits = device_limits();
  const auto fits = [&](size_t bytes) { return bytes <= static_cast<size_t>(limits.max_smem_per_block); };
  const int64_t blocks = static_cast<int64_t>(grid.x) * grid.y * grid.z;
  if (blocks <= limits.num_sms && fits(decode_smem_bytes<D, kDecodeStagesDeep>())) {
    launch_decode_blocks<D, kDecodeStagesDeep>(p, grid, spans.span, ws_acc, ws_ml, stream);
  } else if (fits(decode_smem_bytes<D, kDecodeStagesWide>())) {
    launch_decode_blocks<D, kDecodeStagesWide>(p, grid, spans.span, ws_acc, ws_ml, stream);
  } else {
    launch_decode_blocks<D, kDecodeStagesSmall>(p, grid, spans.span, ws_acc, ws_ml, stream);
  }
  if (spans.num_spans > 1) {
    launch_kernel("paged_attention_decode (merge)", decode_merge_kernel<D>, dim3(p.num_heads, p.num_seqs), D / 2, 0,
                  stream, p, spans.num_spans, spans.span, static_cast<const float*>(ws_acc), static_cast<const float2*>(ws_ml));
  }
}

}  // namespace

int decode_num_splits(int max_seq_len) {
  return max_seq_len <= kDecodePartitionTokens ? 1 : (max_seq_len + kDecodePartitionTokens - 1) / kDecodePartitionTokens;
}

size_t paged_attention_decode_workspace_bytes(int num_seqs, int num_heads, int head_dim, int num_splits) {
  // decode_spans never makes more spans than num_splits, nor more than it takes to fill the GPU with at
  // least num_seqs blocks per span: a bound that stays small for long max_model_len.
  const int64_t target_blocks = decode_target_blocks();
  const int64_t spans = std::min<int64_t>(num_splits, std::max<int64_t>(1, (target_blocks + num_seqs - 1) / std::max(num_seqs, 1)));
  return static_cast<size_t>(num_seqs) * num_heads * spans * (head_dim + 2) * sizeof(float);
}

bool paged_attention_decode_use_clusters(bool enabled) { return g_decode_clusters.exchange(enabled); }

int paged_attention_decode_cluster_size(const PagedAttentionParams& p, int num_splits) {
  if (p.num_seqs <= 0 || (p.head_dim != 64 && p.head_dim != 128)) return 0;
  const int row_tiles = (p.num_heads / p.num_kv_heads + kDecodeRows - 1) / kDecodeRows;
  const int num_spans = decode_spans(num_splits, p.num_kv_heads * row_tiles * p.num_seqs).num_spans;
  return p.head_dim == 128 ? decode_cluster_size<128>(num_spans) : decode_cluster_size<64>(num_spans);
}

void paged_attention_decode(const PagedAttentionParams& p, int num_splits, void* workspace, cudaStream_t stream) {
  if (p.num_seqs <= 0) return;
  check_params(p, "paged_attention_decode: bad shape");
  if (num_splits < decode_num_splits(p.max_seq_len)) {
    throw_cuda_error(cudaErrorInvalidValue, "paged_attention_decode: num_splits below decode_num_splits(max_seq_len)",
                     __FILE__, __LINE__);
  }
  if (p.head_dim == 128) {
    launch_decode_tc<128>(p, num_splits, workspace, stream);
  } else if (p.head_dim == 64) {
    launch_decode_tc<64>(p, num_splits, workspace, stream);
  } else {
    launch_generic(p, /*decode=*/true, stream);
  }
}

}  // namespace pagoda::kernels
