// Token sampling on the device (sampling.h): one 1024-thread block per row of bf16 logits, fp32 arithmetic.
//
// Greedy rows take the argmax (lowest id on ties). Other rows draw with the Gumbel-max trick:
//   token = argmax over kept i of (l_i / T + g_i),   g_i = -log(-log(u_i)),
// which picks i with probability softmax(l / T) restricted to the kept set, with no normaliser and no sort.
// u_i comes from Philox4x32-10 with key = seed and counter = (i / 4, 0, offset): the draw depends only on
// (seed, offset, the row's logits), never on the batch. u_i lies on the lattice of odd multiples of 2^-24, so
// -2.9 < g_i < 16.7: a token less likely than e^-19.5 (~3e-9) times the top token can never be drawn.
//
// Filters. Dividing by T > 0 keeps the order of the logits, so each filter keeps an upper set of the row and
// is a threshold on the logit's 16-bit bf16 pattern, mapped to an order-preserving key (NaN counts as -inf,
// -0 as +0). A token is kept when its key reaches the largest of the thresholds:
//   top-k: the k-th largest key. Tokens tied with it are all kept (the CPU sampler keeps lower ids first), so a
//          few more than k may survive ties.
//   top-p: the largest key t whose upper set {key >= t} (within the top-k set) holds at least top_p - 1e-6 of
//          the top-k set's mass; ties at t are all kept.
//   min-p: the smallest key whose weight exp(l/T - max) reaches min(min_p, 1).
// Min-p relates to the top token, which every filter keeps, so intersecting the three sets equals applying
// them in the CPU sampler's order (top-k, top-p on the renormalised top-k set, min-p).
// Top-k and top-p thresholds come from a 16-way search over the key space: four passes over the row, each
// summing counts (top-k) or weights (top-p) at 16 candidate thresholds in registers, then one block reduction.
// Every sum runs in a fixed order, so a row's result is bitwise reproducible.
//
// Passes over the row (256 KB for a 128k vocabulary, mostly served from L2 after the first): greedy 1; plain
// temperature 1; +1 (the maximum) with top-p or min-p; +4 with top-k; +4 with top-p. The sampling pass runs
// Philox (one call per 4 tokens) and two logarithms per kept token; tokens a filter drops skip them.
// Known differences from the CPU sampler: ties at a top-k/top-p cut (see above); logits are scaled by 1/T
// (a multiply, where the CPU divides); several +inf logits resolve to the lowest id, not uniformly.
#include "pagoda/kernels/sampling.h"

#include <climits>
#include <cstdint>

#include "pagoda/kernels/cuda_check.h"

namespace pagoda::kernels {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr float kTopPTolerance = 1e-6f;  // as the CPU sampler: a nucleus "reaches" top_p within this
constexpr uint32_t kNegInfBits = 0xff80u;
constexpr uint32_t kNegInfKey = 0x007fu;  // key of -inf: the smallest key a sanitised logit can have

// ---- bf16 patterns and their order-preserving keys --------------------------------------------------------

// NaN -> -inf (never drawn, as in the CPU sampler), -0 -> +0 (so that equal values have equal keys).
__device__ __forceinline__ uint32_t sanitize(uint32_t b) {
  if ((b & 0x7fffu) > 0x7f80u) return kNegInfBits;
  return b == 0x8000u ? 0u : b;
}
// Larger value <=> larger key: flip all bits of negatives, set the sign bit of positives.
__device__ __forceinline__ uint32_t to_key(uint32_t b) { return (b & 0x8000u) ? (b ^ 0xffffu) : (b | 0x8000u); }
__device__ __forceinline__ float bits_value(uint32_t b) { return __uint_as_float(b << 16); }
__device__ __forceinline__ float key_value(uint32_t k) {
  return bits_value((k & 0x8000u) ? (k & 0x7fffu) : (k ^ 0xffffu));
}

// exp(s - s_max) for the scaled logit of key k, exactly 1 for the maximum (also when it is +inf).
__device__ __forceinline__ float weight(uint32_t k, float inv_t, float s_max) {
  const float s = key_value(k) * inv_t;
  return s == s_max ? 1.0f : expf(s - s_max);
}

// Calls f(i0, b, n) for this thread's share of the row in quads: tokens i0 .. i0 + n - 1 (i0 a multiple of 4,
// n = 4 except at the row's end) with sanitised patterns b[0..n). Rows that start 16-byte aligned (vocab a
// multiple of 8) are read 8 tokens per load.
template <typename F>
__device__ __forceinline__ void for_each_quad(const uint16_t* __restrict__ row, int vocab, F&& f) {
  int done = 0;
  if ((reinterpret_cast<uintptr_t>(row) & 15u) == 0) {
    const int num_vec = vocab / 8;
    const uint4* vec = reinterpret_cast<const uint4*>(row);
    for (int v = threadIdx.x; v < num_vec; v += kThreads) {
      const uint4 x = __ldg(vec + v);
      const uint32_t lo[4] = {sanitize(x.x & 0xffffu), sanitize(x.x >> 16), sanitize(x.y & 0xffffu),
                              sanitize(x.y >> 16)};
      const uint32_t hi[4] = {sanitize(x.z & 0xffffu), sanitize(x.z >> 16), sanitize(x.w & 0xffffu),
                              sanitize(x.w >> 16)};
      f(8 * v, lo, 4);
      f(8 * v + 4, hi, 4);
    }
    done = num_vec * 8;
  }
  const int num_quads = (vocab - done + 3) / 4;
  for (int q = threadIdx.x; q < num_quads; q += kThreads) {
    const int i0 = done + 4 * q;
    const int n = min(4, vocab - i0);
    uint32_t b[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) b[j] = j < n ? sanitize(__ldg(row + i0 + j)) : kNegInfBits;
    f(i0, b, n);
  }
}

// ---- random numbers ---------------------------------------------------------------------------------------

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
__device__ __forceinline__ uint4 philox4x32_10(uint4 c, uint32_t k0, uint32_t k1) {
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = __umulhi(0xD2511F53u, c.x), lo0 = 0xD2511F53u * c.x;
    const uint32_t hi1 = __umulhi(0xCD9E8D57u, c.z), lo1 = 0xCD9E8D57u * c.z;
    c = make_uint4(hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

// A standard Gumbel variate from 32 random bits: u = odd multiple of 2^-24 (never 0 or 1, exact in float).
__device__ __forceinline__ float gumbel(uint32_t bits) {
  const float u = __uint2float_rn((bits >> 8) | 1u) * 0x1p-24f;
  return -__logf(-logf(u));  // the inner log stays accurate near u = 1, where -log(u) is tiny
}

// ---- block reductions (fixed order: reproducible) ---------------------------------------------------------

struct Shared {
  float sums[kWarps][16];
  float totals[16];
  float best_value[kWarps];
  int best_index[kWarps];
  uint32_t keys[kWarps];
  uint32_t broadcast;
};

struct Best {
  float value;
  int index;
};

// Larger value wins; equal values go to the lower id.
__device__ __forceinline__ void consider(Best& best, float value, int index) {
  if (value > best.value || (value == best.value && index < best.index)) best = {value, index};
}

// The winner of the block; valid in thread 0 only.
__device__ Best block_argmax(Best best, Shared& sh) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float value = __shfl_down_sync(0xffffffffu, best.value, offset);
    const int index = __shfl_down_sync(0xffffffffu, best.index, offset);
    consider(best, value, index);
  }
  __syncthreads();
  if (threadIdx.x % 32 == 0) {
    sh.best_value[threadIdx.x / 32] = best.value;
    sh.best_index[threadIdx.x / 32] = best.index;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kWarps; ++w) consider(best, sh.best_value[w], sh.best_index[w]);
  }
  return best;
}

// Thread 0's value, seen by every thread.
__device__ uint32_t block_broadcast(uint32_t value, Shared& sh) {
  __syncthreads();
  if (threadIdx.x == 0) sh.broadcast = value;
  __syncthreads();
  return sh.broadcast;
}

__device__ uint32_t block_max(uint32_t value, Shared& sh) {
  value = __reduce_max_sync(0xffffffffu, value);
  __syncthreads();
  if (threadIdx.x % 32 == 0) sh.keys[threadIdx.x / 32] = value;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kWarps; ++w) value = max(value, sh.keys[w]);
  }
  return block_broadcast(value, sh);
}

// acc[m] summed over the block, in every thread.
__device__ void block_sum16(float (&acc)[16], Shared& sh) {
#pragma unroll
  for (int m = 0; m < 16; ++m) {
    for (int offset = 16; offset > 0; offset /= 2) acc[m] += __shfl_down_sync(0xffffffffu, acc[m], offset);
  }
  __syncthreads();
  if (threadIdx.x % 32 == 0) {
#pragma unroll
    for (int m = 0; m < 16; ++m) sh.sums[threadIdx.x / 32][m] = acc[m];
  }
  __syncthreads();
  if (threadIdx.x < 16) {
    float total = 0.0f;
    for (int w = 0; w < kWarps; ++w) total += sh.sums[w][threadIdx.x];
    sh.totals[threadIdx.x] = total;
  }
  __syncthreads();
#pragma unroll
  for (int m = 0; m < 16; ++m) acc[m] = sh.totals[m];
}

// ---- thresholds -------------------------------------------------------------------------------------------

// The largest key t with F(t) >= target, where F(t) sums, over the tokens with key >= max(t, floor), 1 (counts)
// or their weight (mass; then target = fraction * F(0), the mass of the tokens at or above floor). Requires
// F(0) >= target. Four passes, each splitting the remaining key range [lo, lo + 16 * 2^shift) into 16 buckets.
__device__ uint32_t search_threshold(const uint16_t* row, int vocab, uint32_t floor, bool mass, float target,
                                     float fraction, float inv_t, float s_max, Shared& sh) {
  uint32_t lo = 0;
  float above = 0.0f;  // F(lo + 16 * 2^shift): the tokens above the range, summed by earlier passes
  for (int shift = 12; shift >= 0; shift -= 4) {
    const uint32_t start = max(lo, floor);
    float acc[16] = {};  // acc[m]: the range's part of F(lo + m * 2^shift)
    for_each_quad(row, vocab, [&](int, const uint32_t(&b)[4], int n) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t k = to_key(b[j]);
        if (j >= n || k < start) continue;
        const uint32_t bucket = (k - lo) >> shift;
        if (bucket >= 16) continue;
        const float v = mass ? weight(k, inv_t, s_max) : 1.0f;
#pragma unroll
        for (int m = 0; m < 16; ++m) acc[m] += bucket >= static_cast<uint32_t>(m) ? v : 0.0f;
      }
    });
    block_sum16(acc, sh);
    if (mass && shift == 12) target = fraction * acc[0];
    // F is non-increasing in m (the sums are monotone in their terms), so this is the largest m that reaches.
    int chosen = 0;
#pragma unroll
    for (int m = 1; m < 16; ++m) chosen = acc[m] + above >= target ? m : chosen;
    float next = above;
#pragma unroll
    for (int m = 0; m < 15; ++m) next = m == chosen ? acc[m + 1] + above : next;
    above = next;
    lo += static_cast<uint32_t>(chosen) << shift;
  }
  return lo;
}

// The smallest key in (-inf, max_key] whose weight reaches min_weight (0 < min_weight <= 1): a bisection on
// the key, in one thread (the weight grows with the key; -inf weighs 0 and max_key 1).
__device__ uint32_t min_p_threshold(uint32_t max_key, float min_weight, float inv_t, float s_max) {
  uint32_t lo = kNegInfKey, hi = max_key;  // weight(lo) < min_weight <= weight(hi)
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (weight(mid, inv_t, s_max) >= min_weight) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}

// ---- the kernel -------------------------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads)
    sample_kernel(int32_t* __restrict__ out, const uint16_t* __restrict__ logits, const SamplingRow* __restrict__ rows,
                  int vocab) {
  __shared__ Shared sh;
  const SamplingRow p = rows[blockIdx.x];
  const uint16_t* row = logits + static_cast<size_t>(blockIdx.x) * vocab;
  Best best{-__int_as_float(0x7f800000), INT_MAX};

  if (!(p.temperature >= kGreedyTemperatureBelow)) {
    for_each_quad(row, vocab, [&](int i0, const uint32_t(&b)[4], int n) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (j < n) consider(best, bits_value(b[j]), i0 + j);
      }
    });
    best = block_argmax(best, sh);
    if (threadIdx.x == 0) out[blockIdx.x] = best.index == INT_MAX ? 0 : best.index;
    return;
  }

  const float inv_t = 1.0f / p.temperature;
  const bool use_top_k = p.top_k > 0 && p.top_k < vocab;
  const bool use_top_p = p.top_p < 1.0f;
  const bool use_min_p = p.min_p > 0.0f;
  uint32_t threshold = 0;  // kept: key >= threshold (0 keeps everything)

  if (use_top_k) {
    threshold = search_threshold(row, vocab, 0, false, static_cast<float>(p.top_k), 0.0f, inv_t, 0.0f, sh);
  }
  if (use_top_p || use_min_p) {
    uint32_t max_key = kNegInfKey;
    for_each_quad(row, vocab, [&](int, const uint32_t(&b)[4], int n) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (j < n) max_key = max(max_key, to_key(b[j]));
      }
    });
    max_key = block_max(max_key, sh);
    if (max_key == kNegInfKey) {  // every token masked: nothing to draw from; stay deterministic as the CPU
      if (threadIdx.x == 0) out[blockIdx.x] = 0;
      return;
    }
    const float s_max = key_value(max_key) * inv_t;
    if (use_top_p) {
      const uint32_t t = search_threshold(row, vocab, threshold, true, 0.0f, p.top_p - kTopPTolerance, inv_t,
                                          s_max, sh);
      threshold = min(t, max_key);  // top_p <= 1e-6 still keeps the top token
    }
    if (use_min_p) {
      const float min_weight = fminf(p.min_p, 1.0f);
      uint32_t t = 0;
      if (threadIdx.x == 0) t = min_p_threshold(max_key, min_weight, inv_t, s_max);
      threshold = max(threshold, block_broadcast(t, sh));
    }
  }

  const uint32_t key0 = static_cast<uint32_t>(p.seed), key1 = static_cast<uint32_t>(p.seed >> 32);
  const uint32_t offset_lo = static_cast<uint32_t>(p.offset), offset_hi = static_cast<uint32_t>(p.offset >> 32);
  for_each_quad(row, vocab, [&](int i0, const uint32_t(&b)[4], int n) {
    bool kept[4];
    bool any = false;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      kept[j] = j < n && to_key(b[j]) >= threshold;
      any = any || kept[j];
    }
    if (!any) return;
    const uint4 r = philox4x32_10(make_uint4(static_cast<uint32_t>(i0) / 4, 0u, offset_lo, offset_hi), key0, key1);
    const uint32_t bits[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (kept[j]) consider(best, bits_value(b[j]) * inv_t + gumbel(bits[j]), i0 + j);
    }
  });
  best = block_argmax(best, sh);
  if (threadIdx.x == 0) out[blockIdx.x] = best.index == INT_MAX ? 0 : best.index;
}

}  // namespace

size_t sampling_workspace_bytes(int /*num_rows*/, int /*vocab*/) { return 0; }

void sample_tokens(int32_t* out_tokens, const __nv_bfloat16* logits, const SamplingRow* rows, int num_rows, int vocab,
                   void* /*workspace*/, cudaStream_t stream) {
  if (num_rows <= 0) return;
  sample_kernel<<<num_rows, kThreads, 0, stream>>>(out_tokens, reinterpret_cast<const uint16_t*>(logits), rows,
                                                   vocab);
  PAGODA_CUDA_CHECK_LAUNCH("sample_tokens");
}

}  // namespace pagoda::kernels
