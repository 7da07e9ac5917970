// Paged attention for prompt chunks and mixed steps, head_dim 64 and 128 (other head dims go to
// paged_attention_generic.cu). prefill_tc_kernel<D> is FlashAttention-2 style: one block = 64 query tokens
// of one (sequence, query head); 4 warps, 16 query rows each. K/V tiles of 64 keys are gathered into
// shared memory (cp.async, double-buffered); S = Q K^T and O += P V run on tensor cores (mma.sync
// m16n8k16, bf16 in, fp32 accumulate); the online softmax stays in registers; key tiles past the causal
// diagonal are never loaded (FP8 KV: tiles of codes, converted by the block into one bf16 tile before
// each tile's MMAs, the keys' scales applied to scores and probabilities). Query tiles of all sequences are numbered one after another, so a mixed step
// launches no blocks for (short sequence, tile of the longest one).
#include "pagoda/kernels/paged_attention_common.cuh"

namespace pagoda::kernels {
using namespace attention;
namespace {

// ---------------------------------------------------------------------------------------------------
// Prefill, tensor cores. grid = (num_heads, query tiles bound, 1), 128 threads. The 64-row query tiles
// of all sequences are numbered sequence by sequence (blockIdx.y); blocks past the last tile exit. So a
// mixed step (many one-token sequences next to a long chunk) launches no block per (sequence, tile of
// the longest chunk). Within a sequence the last tile comes first: the longest causal rows start first.
// bf16 KV: Q, 2 x K, 2 x V. FP8 KV: Q, one bf16 K and V tile that the block dequantizes each FP8 tile
// into, 2 FP8 stages.
template <int D, bool kFp8>
constexpr size_t prefill_smem_bytes() {
  if constexpr (kFp8) return static_cast<size_t>(kTileQ + 2 * kTileK) * tile_ld<D>() * sizeof(bf16) + 2 * fp8_stage_bytes<D>();
  return static_cast<size_t>(kTileQ + 4 * kTileK) * tile_ld<D>() * sizeof(bf16);
}

// Block-wide: finds the sequence holding query tile `idx` (tiles numbered sequence by sequence, each
// sequence ceil(q_len / kTileQ) of them). found = {sequence, tile within it, the sequence's tile count},
// or found[0] = -1 when idx is past the last tile. One pass per kThreads sequences.
__device__ __forceinline__ void locate_query_tile(const int32_t* query_start, int num_seqs, int idx, int (&found)[3],
                                                  int (&warp_sums)[kWarps]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x == 0) found[0] = -1;
  int before = 0;  // tiles of the sequences of earlier passes
  for (int base = 0; base < num_seqs; base += kThreads) {
    const int si = base + threadIdx.x;
    const int count = si < num_seqs ? (query_start[si + 1] - query_start[si] + kTileQ - 1) / kTileQ : 0;
    int incl = count;  // inclusive prefix sum over the block
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += v;
    }
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    int pass_total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      if (w < warp) incl += warp_sums[w];
      pass_total += warp_sums[w];
    }
    const int first = before + incl - count;
    if (idx >= first && idx < first + count) {
      found[0] = si;
      found[1] = idx - first;
      found[2] = count;
    }
    before += pass_total;
    __syncthreads();
    if (found[0] >= 0) break;  // uniform: read after the barrier
  }
  __syncthreads();
}

template <int D, bool kFp8>
__global__ void __launch_bounds__(kThreads) prefill_tc_kernel(const __grid_constant__ PagedAttentionParams p) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  constexpr int kLd = tile_ld<D>();
  constexpr int kTileElems = kTileK * kLd;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* qs = reinterpret_cast<bf16*>(smem_raw);  // [kTileQ][kLd]
  bf16* ks = qs + kTileQ * kLd;                  // [2][kTileK][kLd] (FP8 KV: [1])
  bf16* vs = ks + (kFp8 ? 1 : 2) * kTileElems;   // [2][kTileK][kLd] (FP8 KV: [1])
  [[maybe_unused]] unsigned char* fp8_stages = reinterpret_cast<unsigned char*>(vs + kTileElems);  // FP8 KV: [2] stages
  __shared__ int found[3];
  __shared__ int warp_sums[kWarps];

  locate_query_tile(p.query_start, p.num_seqs, blockIdx.y, found, warp_sums);
  if (found[0] < 0) return;
  const int h = blockIdx.x;
  const int s = found[0];
  const int m0 = (found[2] - 1 - found[1]) * kTileQ;  // first query row of the tile, within the sequence
  const int q_begin = p.query_start[s];
  const int q_len = p.query_start[s + 1] - q_begin;
  const int rows = min(kTileQ, q_len - m0);
  const int seq_len = p.seq_lens[s];
  const int64_t row_stride = static_cast<int64_t>(p.num_heads) * D;  // between tokens in q and out
  bf16* out = p.out + (q_begin + m0) * row_stride + h * D;             // row r at out + r * row_stride
  if (seq_len <= 0) {  // padding sequence
    for (int i = threadIdx.x; i < rows * (D / 2); i += kThreads) {
      reinterpret_cast<uint32_t*>(out + (i / (D / 2)) * row_stride)[i % (D / 2)] = 0u;
    }
    return;
  }
  const int ctx = seq_len - q_len;                         // keys before this chunk; row r sits at ctx + m0 + r
  const int key_end = min(seq_len, ctx + m0 + rows);       // keys visible to some row of the tile
  const int n_tiles = (max(key_end, 0) + kTileK - 1) / kTileK;
  const int kvh = h / (p.num_heads / p.num_kv_heads);
  const int32_t* pages = p.kv_pages + p.kv_page_start[s];

  // Tile j goes to stage j & 1: bf16 tiles straight into ks / vs, FP8 ones into their stage.
  const auto load_tile = [&](int j) {
    const int stage = j & 1;
    if constexpr (kFp8) {
      load_kv_tile_fp8<D>(fp8_stage<D>(fp8_stages + stage * fp8_stage_bytes<D>()), p, pages, kvh, j * kTileK, key_end);
    } else {
      load_kv_tile<D>(ks + stage * kTileElems, vs + stage * kTileElems, p, pages, kvh, j * kTileK, key_end);
    }
  };
  load_q_tile<D, kTileQ>(qs, p.q + (q_begin + m0) * row_stride + h * D, row_stride, rows);
  if (n_tiles > 0) load_tile(0);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  uint32_t qf[D / 16][4];
  load_q_frags<D>(qf, qs + warp * 16 * kLd, lane);
  const bool warp_active = warp * 16 < rows;     // warp-uniform: some of its rows are real
  const int warp_pos = ctx + m0 + warp * 16;     // position of the warp's first row
  const float scale = p.scale * kLog2e;

  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  for (int j = 0; j < n_tiles; ++j) {
    const int stage = kFp8 ? 0 : j & 1;  // the bf16 tile computed on
    if (j + 1 < n_tiles) load_tile(j + 1);  // into the other stage (freed by the last barrier)
    cp_async_commit();
    if constexpr (kFp8) {
      const Fp8Stage st = fp8_stage<D>(fp8_stages + (j & 1) * fp8_stage_bytes<D>());
      dequantize_kv_rows<D, kTileK, kThreads>(ks, st.k, 0, threadIdx.x);
      dequantize_kv_rows<D, kTileK, kThreads>(vs, st.v, 0, threadIdx.x);
      __syncthreads();
    }
    if (warp_active) {
      float sc[kTileK / 8][4];
      qk_tile<D, kTileK / 8>(sc, qf, ks + stage * kTileElems, lane);
      const int key0 = j * kTileK;
      // Causal mask only where some key of the tile lies past some row's position (the diagonal tiles,
      // which also hold the zero-filled keys past key_end).
      const bool masked = key0 + kTileK - 1 > warp_pos;
      float k_factor[kTileK / 8][2], v_factor[kTileK / 8][2];  // FP8: the keys' scales
      if constexpr (kFp8) {
        fp8_key_factors<kTileK / 8>(k_factor, v_factor, fp8_stage<D>(fp8_stages + (j & 1) * fp8_stage_bytes<D>()), 0, t);
      }
#pragma unroll
      for (int nt = 0; nt < kTileK / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + nt * 8 + 2 * t + (e & 1);
          const int pos = warp_pos + g + (e >> 1) * 8;
          float x = sc[nt][e] * scale;
          if constexpr (kFp8) x = __fmul_rn(x, k_factor[nt][e & 1]);
          sc[nt][e] = masked && key > pos ? -INFINITY : x;
        }
      }
      online_softmax<kTileK / 8, D / 8>(sc, m, l, o);
      if constexpr (kFp8) {
#pragma unroll
        for (int nt = 0; nt < kTileK / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) sc[nt][e] *= v_factor[nt][e & 1];
      }
      pv_tile<D, kTileK / 8>(o, sc, vs + stage * kTileElems, lane);
    }
    cp_async_wait<0>();
    __syncthreads();
  }

  if (!warp_active) return;
  if constexpr (kFp8) {  // the value tiles held code * 2^-kFp8TileShift
    static_assert(kFp8TileShift == 56, "the factor below");
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[dt][e] *= 0x1p56f;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float sum = quad_sum(l[r]);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const int row = warp * 16 + g + 8 * r;
    if (row >= rows) continue;
    uint32_t* dst = reinterpret_cast<uint32_t*>(out + row * row_stride);
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) dst[dt * 4 + t] = pack_bf16x2(o[dt][2 * r] * inv, o[dt][2 * r + 1] * inv);
  }
}


template <int D, bool kFp8>
void launch_prefill_tc(const PagedAttentionParams& p, cudaStream_t stream) {
  static std::atomic<uint64_t> configured{0};
  constexpr size_t smem = prefill_smem_bytes<D, kFp8>();
  allow_smem(prefill_tc_kernel<D, kFp8>, smem, configured);
  // Upper bound of sum over sequences of ceil(q_len / kTileQ).
  const int64_t tiles = std::min<int64_t>(static_cast<int64_t>(p.num_seqs) * ((p.max_query_len + kTileQ - 1) / kTileQ),
                                          (p.num_tokens + kTileQ - 1) / kTileQ + static_cast<int64_t>(p.num_seqs));
  if (tiles > 65535) throw_cuda_error(cudaErrorInvalidValue, "paged_attention_prefill: too many query tiles", __FILE__, __LINE__);
  const dim3 grid(p.num_heads, static_cast<unsigned>(tiles), 1);
  launch_kernel(kFp8 ? "paged_attention_prefill (tensor cores, fp8 kv)" : "paged_attention_prefill (tensor cores)",
                prefill_tc_kernel<D, kFp8>, grid, kThreads, smem, stream, p);
}

}  // namespace

void paged_attention_prefill(const PagedAttentionParams& p, cudaStream_t stream) {
  if (p.num_tokens <= 0 || p.num_seqs <= 0 || p.max_query_len <= 0) return;
  check_params(p, "paged_attention_prefill: bad shape");
  const bool fp8 = p.k_fp8 != nullptr;
  if (p.head_dim == 128) {
    fp8 ? launch_prefill_tc<128, true>(p, stream) : launch_prefill_tc<128, false>(p, stream);
  } else if (p.head_dim == 64) {
    fp8 ? launch_prefill_tc<64, true>(p, stream) : launch_prefill_tc<64, false>(p, stream);
  } else {
    launch_generic(p, /*decode=*/false, stream);
  }
}


}  // namespace pagoda::kernels
