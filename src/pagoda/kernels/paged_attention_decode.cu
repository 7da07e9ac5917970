// Paged attention for decode steps (one query token per sequence), head_dim 64 and 128 (others go to
// paged_attention_generic.cu). decode_tc_kernel<D, stages, fp8, min blocks per SM>: one block = one span of keys (a whole number
// of kDecodePartitionTokens partitions) x one KV head x one sequence. The query heads of the GQA group are
// the 16 rows of the MMA, so K/V are read once per group. Each 64-key chunk (cp.async pipeline of 2, 3 or
// 6 stages) is split between the 4 warps, 16 keys each; the warps merge in shared memory at the end. A
// block that holds all of a sequence's keys writes the output; otherwise each writes (max, sum,
// unnormalised acc) to the workspace and decode_merge_kernel combines the spans (log-sum-exp). A span is
// one partition unless the batch alone fills the GPU (see decode_spans): a graph captured with many splits
// then does not launch thousands of blocks that find no keys. FP8 KV (kFp8): the stages hold codes and
// exponents, half the bytes in flight per chunk; each warp builds its MMA fragments from its 16 keys'
// codes in registers (qk_tile_fp8, pv_tile_fp8: no bf16 tile, no extra barrier) and applies the keys'
// scales to scores and probabilities. Being lighter on shared memory, FP8 runs four blocks an SM when
// the grid is large.
#include "pagoda/core/env_knob.h"
#include "pagoda/kernels/paged_attention_common.cuh"

namespace pagoda::kernels {
using namespace attention;
namespace {

// ---------------------------------------------------------------------------------------------------
// Decode, tensor cores. grid = (num_spans, num_kv_heads * ceil(group / 16), num_seqs), 128 threads; block
// x covers keys [x * span, (x + 1) * span). Workspace (num_spans > 1): acc [num_seqs, num_heads,
// num_spans, D] fp32, then ml [num_seqs, num_heads, num_spans] float2 (running max in log2 units, sum of
// exp2). num_spans <= num_splits, so paged_attention_decode_workspace_bytes covers it.
//
// Each sequence's span comes from its own length, on the device (graph-safe): the span decode_spans would pick
// for a grid sized for this sequence (its keys over up to `wanted` blocks, whole partitions), or longer where
// the grid has fewer spans than that. A graph captured for a long max_model_len thus spreads a shorter
// sequence over as many blocks as a graph sized for it would (before, every sequence took the span of the
// longest: at batch 1 with 131,072-key graphs an 8k context ran on 4 blocks a head instead of 63). Past
// kDecodeLongContext keys a block takes at least kDecodeLongSpan of them, so half as many blocks do twice the
// work each and the merge reads half as many partials. Batch 1 on the H200 (Llama-3-8B, graph split for
// 4,096 keys): 64-key spans are faster at 128 keys of context (4.29 vs 4.35 ms a step), 128-key spans at
// 2,048 (4.45 vs 4.55 ms).
constexpr int kDecodeLongContext = 512;
constexpr int kDecodeLongSpan = 2 * kDecodePartitionTokens;
struct SpanRule {
  int span;       // keys a block covers for the longest sequence the grid serves (decode_spans)
  int wanted;     // blocks per (sequence, KV head row tile) that fill the GPU; 0: every sequence takes `span`
  int long_span;  // the fewest keys a block takes past kDecodeLongContext (kDecodeLongSpan unless measuring)
  bool early_loads = true;  // the first chunks loaded before the PDL wait (PAGODA_DECODE_EARLY_LOADS=0: after it)
};
// ceil(a / b) for 0 < a, b < 2^24 (a is a count of 64-key partitions) by a correctly rounded float division:
// exact, since a non-integer a / b is at least 1 / b above the integer below it and the rounding moves it by at
// most a / b * 2^-24 < 1 / b. Integer
// divisions by a variable cost dozens of instructions on the critical path of these small kernels: computed in
// every block and merge, they made the batch-1 kernel and its merge 0.9 us slower at 128 keys (H200); now they
// are only computed where a sequence needs more than one partition a block.
__device__ __forceinline__ int ceil_div_small(int a, int b) {
  return static_cast<int>(ceilf(__fdiv_rn(static_cast<float>(a), static_cast<float>(b))));
}
__device__ __forceinline__ int sequence_span(int seq_len, SpanRule rule, int num_spans) {
  int span = rule.span;
  if (rule.wanted > 0 && seq_len > 0) {
    constexpr int kP = kDecodePartitionTokens;
    const int parts = (seq_len + kP - 1) / kP;  // a shift
    int per_span = 1;                           // a partition per block while there are blocks for them all
    if (parts > rule.wanted || parts > num_spans)  // else: the grid's spans must cover it
      per_span = max(ceil_div_small(parts, min(parts, rule.wanted)), ceil_div_small(parts, num_spans));
    span = per_span * kP;
  }
  return seq_len > kDecodeLongContext ? max(span, rule.long_span) : span;
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
// Q tile, then the pipeline stages (bf16 tiles, or FP8 codes and exponents); the merge buffers alias what
// follows Q.
template <int D, int kStages, bool kFp8>
constexpr size_t decode_smem_bytes() {
  const size_t q_bytes = static_cast<size_t>(kDecodeRows) * tile_ld<D>() * sizeof(bf16);
  if constexpr (kFp8) return q_bytes + kStages * fp8_stage_bytes<D>();
  return q_bytes + kStages * decode_stage_elems<D>() * sizeof(bf16);
}

template <int D, int kStages, bool kFp8, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    decode_tc_kernel(const __grid_constant__ PagedAttentionParams p, SpanRule rule, float* ws_acc, float2* ws_ml) {
  // Before pdl_grid_sync() this kernel reads only what the kernel before it does not write (launch.cuh): the
  // step's metadata and the keys before each sequence's last, written by earlier steps (or by kernels that
  // have finished when this one starts). So the first chunks' loads overlap the kernel before (the QKV
  // projection, which writes Q and the last key); Q and a chunk holding the last key are loaded after the wait.
  constexpr int kLd = tile_ld<D>();
  static_assert(decode_red_bytes<D>() <= decode_smem_bytes<D, kStages, kFp8>() - kDecodeRows * kLd * sizeof(bf16),
                "merge buffers fit behind Q");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* qs = reinterpret_cast<bf16*>(smem_raw);  // [16][kLd]
  bf16* stages = qs + kDecodeRows * kLd;         // bf16 KV: [kStages][K, V][kTileK][kLd]
  [[maybe_unused]] unsigned char* fp8_stages = reinterpret_cast<unsigned char*>(stages);  // FP8 KV: [kStages]

  const int split = blockIdx.x;
  const int num_spans = gridDim.x;
  const int s = blockIdx.z;
  const int group = p.num_heads / p.num_kv_heads;
  const int row_tiles = (group + kDecodeRows - 1) / kDecodeRows;
  const int kvh = blockIdx.y / row_tiles;
  const int head0 = kvh * group + (blockIdx.y % row_tiles) * kDecodeRows;  // query head of row 0
  const int rows = min(kDecodeRows, (kvh + 1) * group - head0);
  const int token = p.query_start[s];
  const int seq_len = p.seq_lens[s];
  const int span = sequence_span(seq_len, rule, num_spans);
  const int k_begin = split * span;
  bf16* out = p.out + (static_cast<int64_t>(token) * p.num_heads + head0) * D;  // row r at out + r * D
  if (k_begin >= seq_len) {  // span past the end; with one span this is a padding sequence
    pdl_grid_sync();
    if (num_spans == 1) {
      for (int i = threadIdx.x; i < rows * (D / 2); i += kThreads) reinterpret_cast<uint32_t*>(out)[i] = 0u;
    }
    return;
  }
  const int k_end = min(seq_len, k_begin + span);
  const bool whole_sequence = k_begin == 0 && k_end == seq_len;  // one block holds every key: no merge
  const int n_chunks = (k_end - k_begin + kTileK - 1) / kTileK;
  const int32_t* pages = p.kv_pages + p.kv_page_start[s];
  auto stage_k = [&](int i) { return stages + (i % kStages) * decode_stage_elems<D>(); };
  auto stage_v = [&](int i) { return stage_k(i) + kTileK * kLd; };
  auto fp8_stage_at = [&](int i) { return fp8_stage<D>(fp8_stages + (i % kStages) * fp8_stage_bytes<D>()); };
  auto load_chunk = [&](int i) {
    if constexpr (kFp8) {
      load_kv_tile_fp8<D>(fp8_stage_at(i), p, pages, kvh, k_begin + i * kTileK, k_end);
    } else {
      load_kv_tile<D>(stage_k(i), stage_v(i), p, pages, kvh, k_begin + i * kTileK, k_end);
    }
  };

  // Prologue: chunk c < kStages - 1 in cp.async group c when it lies before the last key (before the wait), else
  // in group kStages - 1 (after it); chunk c >= kStages - 1 is loaded in the loop, in group c + 1. (With
  // rule.early_loads off, everything after the wait: chunk c in group c, Q in group 0.)
  const bf16* q_rows = p.q + (static_cast<int64_t>(token) * p.num_heads + head0) * D;
  if (rule.early_loads) {
    const auto early = [&](int c) { return k_begin + (c + 1) * kTileK < seq_len; };  // its keys end before the last
#pragma unroll
    for (int c = 0; c < kStages - 1; ++c) {
      if (c < n_chunks && early(c)) load_chunk(c);
      cp_async_commit();
    }
    pdl_grid_sync();
    load_q_rows<D, kDecodeRows>(qs, q_rows, D, rows);
    const bool late_chunk = n_chunks <= kStages - 1 && !early(n_chunks - 1);  // only the last chunk can be late
    if (late_chunk) load_chunk(n_chunks - 1);
    cp_async_commit();
    if (late_chunk) {
      cp_async_wait<0>();
    } else {
      cp_async_wait<kStages - 1>();  // group 0: chunk 0
    }
  } else {
    pdl_grid_sync();
    load_q_tile<D, kDecodeRows>(qs, q_rows, D, rows);
#pragma unroll
    for (int c = 0; c < kStages - 1; ++c) {
      if (c < n_chunks) load_chunk(c);
      cp_async_commit();
    }
    cp_async_wait<kStages - 2>();
  }
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  uint32_t qf[D / 16][4];
  if constexpr (kFp8) {
    load_q_frags_fp8<D>(qf, qs, lane);
  } else {
    load_q_frags<D>(qf, qs, lane);
  }
  const float scale = p.scale * kLog2e;
  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  for (int j = 0; j < n_chunks; ++j) {
    const int next = j + kStages - 1;  // its stage was last read in iteration j - 1
    if (next < n_chunks) load_chunk(next);
    cp_async_commit();  // always, so that chunk j + 1's group (j + 2, or j + 1 without early loads) is complete below
    const int key0 = k_begin + j * kTileK + warp * 16;  // this warp's 16 keys of the chunk
    if (key0 < k_end) {
      float sc[2][4];
      [[maybe_unused]] float k_factor[2][2], v_factor[2][2];  // FP8: the keys' scales (paged_attention_common.cuh)
      if constexpr (kFp8) {
        const Fp8Stage st = fp8_stage_at(j);
        qk_tile_fp8<D>(sc, qf, st.k + warp * 16 * fp8_tile_ld<D>(), lane);
        fp8_key_factors<2, kFp8QkShift, 64>(k_factor, v_factor, st, warp * 16, t);
      } else {
        qk_tile<D, 2>(sc, qf, stage_k(j) + warp * 16 * kLd, lane);
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + nt * 8 + 2 * t + (e & 1);
          float x = sc[nt][e] * scale;
          if constexpr (kFp8) x = __fmul_rn(x, k_factor[nt][e & 1]);
          sc[nt][e] = key < k_end ? x : -INFINITY;
        }
      }
      online_softmax<2, D / 8>(sc, m, l, o);
      if constexpr (kFp8) {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) sc[nt][e] *= v_factor[nt][e & 1];
        pv_tile_fp8<D>(o, sc, fp8_stage_at(j).v + warp * 16 * fp8_tile_ld<D>(), lane);
      } else {
        pv_tile<D, 2>(o, sc, stage_v(j) + warp * 16 * kLd, lane);
      }
    }
    cp_async_wait<kStages - 2>();
    __syncthreads();
  }
  cp_async_wait<0>();  // only empty groups can be pending; the stages are free after this barrier
  __syncthreads();
  if constexpr (kFp8) {  // the value tiles held code * 2^-kFp8TileShift
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[dt][e] *= 0x1p56f;
    static_assert(kFp8TileShift == 56, "the factor above");
  }

  // Merge the four warps: red_o [warp][row][D + 4], red_m / red_l / red_w [warp][row], row_m / row_l [row].
  constexpr int kRedLd = decode_red_ld<D>();
  float* red_o = reinterpret_cast<float*>(stages);
  float* red_m = red_o + kWarps * kDecodeRows * kRedLd;
  float* red_l = red_m + kWarps * kDecodeRows;
  float* red_w = red_l + kWarps * kDecodeRows;
  float* row_m = red_w + kWarps * kDecodeRows;
  float* row_l = row_m + kDecodeRows;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    const float sum = quad_sum(l[r]);
    if (t == 0) {
      red_m[warp * kDecodeRows + row] = m[r];
      red_l[warp * kDecodeRows + row] = sum;
    }
    float* dst = red_o + (warp * kDecodeRows + row) * kRedLd;
    if constexpr (kFp8) {
      store_o_fp8<D>(dst, o, r, t);
    } else {
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        *reinterpret_cast<float2*>(dst + dt * 8 + 2 * t) = make_float2(o[dt][2 * r], o[dt][2 * r + 1]);
      }
    }
  }
  __syncthreads();
  if (threadIdx.x < kDecodeRows) {
    const int row = threadIdx.x;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, red_m[w * kDecodeRows + row]);
    const float m_ref = mx == -INFINITY ? 0.0f : mx;
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float wt = exp2f(red_m[w * kDecodeRows + row] - m_ref);
      red_w[w * kDecodeRows + row] = wt;
      sum += red_l[w * kDecodeRows + row] * wt;
    }
    row_m[row] = mx;
    row_l[row] = sum;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < rows * (D / 2); i += kThreads) {
    const int row = i / (D / 2), d = (i % (D / 2)) * 2;
    float2 acc = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float wt = red_w[w * kDecodeRows + row];
      const float2 v = *reinterpret_cast<const float2*>(red_o + (w * kDecodeRows + row) * kRedLd + d);
      acc.x += wt * v.x;
      acc.y += wt * v.y;
    }
    if (whole_sequence) {
      const float inv = row_l[row] > 0.0f ? 1.0f / row_l[row] : 0.0f;
      reinterpret_cast<uint32_t*>(out + row * D)[d / 2] = pack_bf16x2(acc.x * inv, acc.y * inv);
    } else {
      const int64_t part = (static_cast<int64_t>(s) * p.num_heads + head0 + row) * num_spans + split;
      *reinterpret_cast<float2*>(ws_acc + part * D + d) = acc;
      if (d == 0) ws_ml[part] = make_float2(row_m[row], row_l[row]);
    }
  }
}

// Combines the spans of one (sequence, head). grid = (num_heads, num_seqs), D / 2 threads.
template <int D>
__global__ void __launch_bounds__(D / 2)
    decode_merge_kernel(const __grid_constant__ PagedAttentionParams p, int num_spans, SpanRule rule, const float* ws_acc,
                        const float2* ws_ml) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  const int h = blockIdx.x;
  const int s = blockIdx.y;
  const int seq_len = p.seq_lens[s];
  const int span = sequence_span(seq_len, rule, num_spans);
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
// batch alone makes decode_target_blocks() (2 an SM, FP8 KV 4), fewer and longer spans (often one: no merge), so that a graph
// captured with the largest split count does not launch blocks past every sequence's end. Depends on
// host values only (graph-safe). Coverage, for the longest sequence the split count allows (L = num_splits
// * kDecodePartitionTokens keys): sequences up to kDecodeLongContext keys take `span`-key blocks, longer
// ones blocks of sequence_span(), so num_spans is the larger of the two counts they need. (A graph for
// 4,096 keys at batch 1 launches 32 blocks a head instead of 64: at 2 blocks an SM, one wave.) Shorter
// sequences are spread by sequence_span() from `wanted`. PAGODA_DECODE_SPAN_OF_LONGEST=1 gives every sequence
// the longest one's span instead (the rule before 2026-12-03, kept for A/B measurements).
struct DecodeSpans {
  int num_spans;
  SpanRule rule;
};
bool span_of_longest() {
  static const bool on = env_flag("PAGODA_DECODE_SPAN_OF_LONGEST", false);
  return on;
}
// Measurement knobs (core/env_knob.h): PAGODA_DECODE_LONG_SPAN (keys, a multiple of kDecodePartitionTokens up to
// 4,096; default kDecodeLongSpan), PAGODA_DECODE_FP8_MANY=0 (no four-block FP8 launch: the two-block ones) and
// PAGODA_DECODE_EARLY_LOADS=0 (no loads before the PDL wait).
int decode_long_span() {
  static const int keys = [] {
    const int n = env_int("PAGODA_DECODE_LONG_SPAN", kDecodeLongSpan);
    return n >= kDecodePartitionTokens && n <= 4096 && n % kDecodePartitionTokens == 0 ? n : kDecodeLongSpan;
  }();
  return keys;
}
bool decode_early_loads() {
  static const bool on = env_flag("PAGODA_DECODE_EARLY_LOADS", true);
  return on;
}
bool decode_fp8_many_blocks() {
  static const bool on = env_flag("PAGODA_DECODE_FP8_MANY", true);
  return on;
}
DecodeSpans decode_spans(int num_splits, int blocks_per_span, bool fp8_kv, int blocks_per_sm) {
  const int target_blocks = blocks_per_sm > 0 ? blocks_per_sm * device_limits().num_sms : decode_target_blocks(fp8_kv);
  const int wanted = std::max(1, (target_blocks + blocks_per_span - 1) / blocks_per_span);
  const int parts_per_span = (num_splits + std::min(num_splits, wanted) - 1) / std::min(num_splits, wanted);
  const int span = parts_per_span * kDecodePartitionTokens;
  const int64_t longest = static_cast<int64_t>(num_splits) * kDecodePartitionTokens;
  const auto spans_for = [](int64_t keys, int span_keys) { return static_cast<int>((keys + span_keys - 1) / span_keys); };
  const int long_span = decode_long_span();
  const int num_spans = std::max(spans_for(std::min<int64_t>(longest, kDecodeLongContext), span),
                                 spans_for(longest, std::max(span, long_span)));
  return {num_spans, SpanRule{span, span_of_longest() ? 0 : wanted, long_span, decode_early_loads()}};
}

template <int D, int kStages, bool kFp8, int kMinBlocks = 2>
void launch_decode_blocks(const PagedAttentionParams& p, dim3 grid, SpanRule rule, float* ws_acc, float2* ws_ml,
                          cudaStream_t stream) {
  static std::atomic<uint64_t> configured{0};
  constexpr size_t smem = decode_smem_bytes<D, kStages, kFp8>();
  allow_smem(decode_tc_kernel<D, kStages, kFp8, kMinBlocks>, smem, configured);
  launch_kernel(kFp8 ? "paged_attention_decode (tensor cores, fp8 kv)" : "paged_attention_decode (tensor cores)",
                decode_tc_kernel<D, kStages, kFp8, kMinBlocks>, grid, kThreads, smem, stream, p, rule, ws_acc, ws_ml);
}

template <int D, bool kFp8>
void launch_decode_stages(const PagedAttentionParams& p, dim3 grid, SpanRule rule, float* ws_acc, float2* ws_ml,
                          cudaStream_t stream) {
  const DeviceLimits limits = device_limits();
  const auto fits = [&](size_t bytes) { return bytes <= static_cast<size_t>(limits.max_smem_per_block); };
  const int64_t blocks = static_cast<int64_t>(grid.x) * grid.y * grid.z;
  constexpr int kDeep = kFp8 ? kDecodeStagesDeepFp8 : kDecodeStagesDeep;
  constexpr int kWide = kFp8 ? kDecodeStagesWideFp8 : kDecodeStagesWide;
  constexpr int kWideSmall = kFp8 ? kDecodeStagesWideFp8Small : kDecodeStagesWide;
  // An SM holds what one block may opt into plus 1 KB (reserved per block): 228 KB on sm_90, 164 on sm_80.
  const auto n_per_sm = [&](size_t bytes, int n) {
    return n * (bytes + 1024) <= static_cast<size_t>(limits.max_smem_per_block) + 1024;
  };
  if (blocks <= limits.num_sms && fits(decode_smem_bytes<D, kDeep, kFp8>())) {
    launch_decode_blocks<D, kDeep, kFp8>(p, grid, rule, ws_acc, ws_ml, stream);
    return;
  }
  // FP8 KV, more blocks than two per SM hold: four blocks of two stages each. Its warps spend more of a
  // chunk converting codes than waiting for them, so more warps beat deeper pipelines (H200, Llama-3-8B
  // heads, decode alone: 1.34x the bf16 kernel at 32k context against 1.12x with five stages and two blocks;
  // at 2k context, one wave of blocks, the deeper pipeline is the faster; docs/PERFORMANCE.md).
  if constexpr (kFp8) {
    if (decode_fp8_many_blocks() && blocks > 2 * static_cast<int64_t>(limits.num_sms) &&
        n_per_sm(decode_smem_bytes<D, kDecodeStagesManyFp8, true>(), 4)) {
      launch_decode_blocks<D, kDecodeStagesManyFp8, true, 4>(p, grid, rule, ws_acc, ws_ml, stream);
      return;
    }
  }
  if (kWide != kWideSmall && n_per_sm(decode_smem_bytes<D, kWide, kFp8>(), 2)) {
    launch_decode_blocks<D, kWide, kFp8>(p, grid, rule, ws_acc, ws_ml, stream);
  } else if (fits(decode_smem_bytes<D, kWideSmall, kFp8>())) {
    launch_decode_blocks<D, kWideSmall, kFp8>(p, grid, rule, ws_acc, ws_ml, stream);
  } else {
    launch_decode_blocks<D, kDecodeStagesSmall, kFp8>(p, grid, rule, ws_acc, ws_ml, stream);
  }
}

template <int D>
void launch_decode_tc(const PagedAttentionParams& p, int num_splits, void* workspace, cudaStream_t stream) {
  const int group = p.num_heads / p.num_kv_heads;
  const int row_tiles = (group + kDecodeRows - 1) / kDecodeRows;
  const DecodeSpans spans =
      decode_spans(num_splits, p.num_kv_heads * row_tiles * p.num_seqs, p.k_fp8 != nullptr, p.decode_blocks_per_sm);
  float* ws_acc = static_cast<float*>(workspace);
  float2* ws_ml = nullptr;
  if (spans.num_spans > 1) {
    if (workspace == nullptr) throw_cuda_error(cudaErrorInvalidValue, "paged_attention_decode: no workspace", __FILE__, __LINE__);
    ws_ml = reinterpret_cast<float2*>(ws_acc + static_cast<size_t>(p.num_seqs) * p.num_heads * spans.num_spans * D);
  }
  const dim3 grid(spans.num_spans, p.num_kv_heads * row_tiles, p.num_seqs);
  if (p.k_fp8 != nullptr) {
    launch_decode_stages<D, true>(p, grid, spans.rule, ws_acc, ws_ml, stream);
  } else {
    launch_decode_stages<D, false>(p, grid, spans.rule, ws_acc, ws_ml, stream);
  }
  if (spans.num_spans > 1) {
    launch_kernel("paged_attention_decode (merge)", decode_merge_kernel<D>, dim3(p.num_heads, p.num_seqs), D / 2, 0,
                  stream, p, spans.num_spans, spans.rule, static_cast<const float*>(ws_acc), static_cast<const float2*>(ws_ml));
  }
}

}  // namespace

int decode_blocks_wanted_per_sm(bool fp8_kv) { return decode_blocks_per_sm(fp8_kv); }

int decode_num_splits(int max_seq_len) {
  return max_seq_len <= kDecodePartitionTokens ? 1 : (max_seq_len + kDecodePartitionTokens - 1) / kDecodePartitionTokens;
}

size_t paged_attention_decode_workspace_bytes(int num_seqs, int num_heads, int head_dim, int num_splits) {
  // decode_spans never makes more spans than num_splits, nor more than it takes to fill the GPU with at
  // least num_seqs blocks per span: a bound that stays small for long max_model_len.
  const int64_t target_blocks = std::max(decode_target_blocks(false), decode_target_blocks(true));
  const int64_t spans = std::min<int64_t>(num_splits, std::max<int64_t>(1, (target_blocks + num_seqs - 1) / std::max(num_seqs, 1)));
  return static_cast<size_t>(num_seqs) * num_heads * spans * (head_dim + 2) * sizeof(float);
}

void paged_attention_decode(const PagedAttentionParams& p, int num_splits, void* workspace, cudaStream_t stream) {
  if (p.num_seqs <= 0) return;
  check_params(p, "paged_attention_decode: bad shape");
  if (p.decode_blocks_per_sm < 0 ||
      p.decode_blocks_per_sm > std::max(decode_blocks_per_sm(false), decode_blocks_per_sm(true))) {
    throw_cuda_error(cudaErrorInvalidValue, "paged_attention_decode: decode_blocks_per_sm beyond the workspace's bound",
                     __FILE__, __LINE__);
  }
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
