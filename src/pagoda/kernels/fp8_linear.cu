// FP8 W8A8 decode GEMMs and the activation quantization (fp8_linear.h).
//
// A warp owns one tile of 16 rows and walks it along K (a slice of K when the GPU is short of warps, as in
// quant_gemv.cu), 64 columns a chunk: each lane loads 16 bytes of rows 2p and 2p + 1 of the tile (columns
// 16t .. 16t + 15 of the chunk) and 16 bytes of its token's codes, and runs two mma.sync m16n8k32 e4m3. The
// MMA's k index 4t + i stands for column 16t + 8j + i and 16 + 4t + i for 16t + 8j + 4 + i (MMA j = 0, 1) in
// both operands, so the product is unchanged and every load is a plain 16-byte one; fragment rows p and p + 8
// are tile rows 2p and 2p + 1, the row pair the SwiGLU and RoPE epilogues combine. Each MMA starts from zero
// and its four sums are added to fp32 accumulators, so no sum runs longer than 32 products inside the tensor
// core (whose FP8 accumulation keeps fewer bits than fp32). A ring of chunks is in flight (6 at one token
// tile, 4 at two), each reissued as soon as it is consumed, so a warp's short slice waits on few memory
// latencies in a row; the weights of the first are issued before the PDL wait. Results are scaled by the row's
// weight scale and the token's activation scale, then go through the shared epilogues (gemm_epilogue.cuh).
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>

#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/fp8_activation.cuh"
#include "pagoda/kernels/fp8_linear.h"
#include "pagoda/kernels/gemm_epilogue.cuh"
#include "pagoda/kernels/launch.cuh"
#include "pagoda/kernels/product_scales.cuh"
#include "pagoda/kernels/weight_loads.cuh"

namespace pagoda::kernels {
namespace {

constexpr int kWarps = 8;  // per block: K may be cut in up to 8 slices
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = 16;
constexpr int kChunkCols = 64;
constexpr int kBlocksPerSm = 2;         // __launch_bounds__ below
constexpr int kMinChunksPerSlice = 4;

__device__ __forceinline__ uint32_t word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// d = a · b: A 16 x 32 e4m3 (rows x k), B 32 x 8 e4m3 (k x tokens), D 16 x 8 fp32, from zero.
__device__ __forceinline__ void mma_fp8(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %10, %10, %10};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(0.0f));
#else
  __trap();  // FP8 MMAs need sm_89: fp8_w8a8_supported() keeps older GPUs off this kernel
#endif
}

// out [T, N] (or the epilogue's outputs); TT token tiles of 8. Block = kWarps warps =
// kWarps / splits tiles, each tile's chunks cut into `splits` slices (one warp per slice).
template <int TT, Epilogue E>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    fp8_gemv_kernel(bf16* __restrict__ out, const uint8_t* __restrict__ xq, const float* __restrict__ xs,
                    const Fp8Rows w, int num_tokens, int splits, const QkvRopeOutput rope) {
  constexpr int D = TT == 1 ? 6 : 4;  // chunks in flight: 72 or 64 registers of loads
  __shared__ float partial[kWarps][TT * 4][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int p = lane / 4, t = lane % 4;
  const int tiles = (w.n + kTileRows - 1) / kTileRows, chunks = (w.k + kChunkCols - 1) / kChunkCols;
  const int slice = warp % splits;
  const int tile_index = blockIdx.x * (kWarps / splits) + warp / splits;
  const int tile = min(tile_index, tiles - 1);  // past the last tile: recompute it, store nothing
  const int c_begin = static_cast<int>(static_cast<int64_t>(chunks) * slice / splits);
  const int c_end = static_cast<int>(static_cast<int64_t>(chunks) * (slice + 1) / splits);
  const int64_t row0 = static_cast<int64_t>(tile) * kTileRows + 2 * p;
  const uint8_t* w0 = w.codes + row0 * w.k + 16 * t;  // rows 2p and 2p + 1 of the tile, at the lane's columns
  const uint8_t* w1 = w0 + w.k;
  const uint8_t* xt[TT];  // the lane's token row of each token tile, or null past T
#pragma unroll
  for (int tt = 0; tt < TT; ++tt) {
    const int token = 8 * tt + p;
    xt[tt] = token < num_tokens ? xq + static_cast<int64_t>(token) * w.k + 16 * t : nullptr;
  }

  // A ring of D chunks in flight: chunk c lives in stage c % D; consuming a stage reissues it D chunks on.
  uint4 rw[D][2], rx[D][TT];
  auto issue_weights = [&](int d, int c) {
    const bool ok = c < c_end && c * kChunkCols + 16 * t < w.k;
    const int64_t offset = static_cast<int64_t>(c) * kChunkCols;
    rw[d][0] = ok ? load_weights(reinterpret_cast<const uint4*>(w0 + offset)) : make_uint4(0, 0, 0, 0);
    rw[d][1] = ok ? load_weights(reinterpret_cast<const uint4*>(w1 + offset)) : make_uint4(0, 0, 0, 0);
  };
  auto issue_x = [&](int d, int c) {
    const bool ok = c < c_end && c * kChunkCols + 16 * t < w.k;
#pragma unroll
    for (int tt = 0; tt < TT; ++tt)
      rx[d][tt] = ok && xt[tt] ? __ldg(reinterpret_cast<const uint4*>(xt[tt] + static_cast<int64_t>(c) * kChunkCols))
                               : make_uint4(0, 0, 0, 0);
  };
  // The weights are written by no kernel: the first loads overlap the kernel before (launch.cuh).
#pragma unroll
  for (int d = 0; d < D; ++d) issue_weights(d, c_begin + d);
  pdl_grid_sync();
#pragma unroll
  for (int d = 0; d < D; ++d) issue_x(d, c_begin + d);

  float acc[TT][4];
#pragma unroll
  for (int tt = 0; tt < TT; ++tt)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[tt][i] = 0.0f;

  for (int c0 = c_begin; c0 < c_end; c0 += D) {  // warp-uniform
#pragma unroll
    for (int d = 0; d < D; ++d) {
      if (c0 + d >= c_end) break;  // warp-uniform
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int tt = 0; tt < TT; ++tt) {
          float r[4];
          mma_fp8(r, word_of(rw[d][0], 2 * j), word_of(rw[d][1], 2 * j), word_of(rw[d][0], 2 * j + 1),
                  word_of(rw[d][1], 2 * j + 1), word_of(rx[d][tt], 2 * j), word_of(rx[d][tt], 2 * j + 1));
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[tt][i] += r[i];
        }
      }
      issue_weights(d, c0 + d + D);
      issue_x(d, c0 + d + D);
    }
  }

  if (splits > 1) {  // uniform over the block
#pragma unroll
    for (int tt = 0; tt < TT; ++tt)
#pragma unroll
      for (int i = 0; i < 4; ++i) partial[warp][tt * 4 + i][lane] = acc[tt][i];
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int tt = 0; tt < TT; ++tt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float sum = 0.0f;
        for (int sl = 0; sl < splits; ++sl) sum += partial[warp + sl][tt * 4 + i][lane];
        acc[tt][i] = sum;
      }
  }
  if (tile_index >= tiles) return;

  // Lane (p, t) holds rows 2p, 2p + 1 of the tile (fragment rows p, p + 8) for tokens 8tt + 2t, 8tt + 2t + 1.
  const int row = static_cast<int>(row0);
  const float s0 = w.scales[row], s1 = w.scales[row + 1];  // padded rows have scale 0
#pragma unroll
  for (int tt = 0; tt < TT; ++tt) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int token = 8 * tt + 2 * t + j;
      if (token >= num_tokens) continue;
      const float sx = xs[token];
      const float a0 = scaled_sum(acc[tt][j], s0, sx), a1 = scaled_sum(acc[tt][2 + j], s1, sx);
      if constexpr (E == Epilogue::kPlain) {
        store_rows<E>(out, rope, w.n, token, row, a0, 0.0f);
        store_rows<E>(out, rope, w.n, token, row + 1, a1, 0.0f);
      } else {
        store_rows<E>(out, rope, w.n, token, row, a0, a1);
      }
    }
  }
}

template <Epilogue E>
void launch(bf16* out, const Fp8Activations& x, const Fp8Rows& w, int num_tokens, const QkvRopeOutput& rope,
            cudaStream_t stream) {
  if (!fp8_gemv_supported(w, num_tokens))
    throw_cuda_error(cudaErrorInvalidValue, "fp8_gemv: shape not supported", __FILE__, __LINE__);
  const int64_t tiles = (w.n + kTileRows - 1) / kTileRows, chunks = (w.k + kChunkCols - 1) / kChunkCols;
  const int splits = one_wave_splits(tiles, chunks, kWarps, kBlocksPerSm, kMinChunksPerSlice);
  const int64_t tiles_per_block = kWarps / splits;
  const unsigned blocks = static_cast<unsigned>((tiles + tiles_per_block - 1) / tiles_per_block);
  constexpr const char* name = E == Epilogue::kPlain ? "fp8_gemv" : E == Epilogue::kSilu ? "fp8_gemv_silu" : "fp8_gemv_qkv_rope";
  if (num_tokens > 8) {
    launch_kernel(name, fp8_gemv_kernel<2, E>, blocks, kThreads, 0, stream, out, x.codes, x.scales, w, num_tokens,
                  splits, rope);
  } else {
    launch_kernel(name, fp8_gemv_kernel<1, E>, blocks, kThreads, 0, stream, out, x.codes, x.scales, w, num_tokens,
                  splits, rope);
  }
}

// One block per row: the row's amax (unless the scale is static), then its codes, 8 values a thread a step. The
// first kCachedSteps steps' values stay in registers between the two passes (K up to 16,384 with 256 threads), so
// the row is read once.
constexpr int kCachedSteps = 8;
__global__ void quantize_fp8_rows_kernel(uint8_t* __restrict__ codes, float* __restrict__ scales,
                                         const bf16* __restrict__ x, int k, float static_scale) {
  pdl_grid_sync();
  __shared__ float warp_max[32];
  __shared__ float row_scale;
  const bf16* row = x + static_cast<int64_t>(blockIdx.x) * k;
  const int step = static_cast<int>(blockDim.x) * 8;
  uint4 cached[kCachedSteps];
#pragma unroll
  for (int j = 0; j < kCachedSteps; ++j) {  // all loads in flight before any is used
    const int i = threadIdx.x * 8 + j * step;
    cached[j] = i < k ? *reinterpret_cast<const uint4*>(row + i) : make_uint4(0, 0, 0, 0);
  }
  float s = static_scale;
  if (!(static_scale > 0.0f)) {
    float amax = 0.0f;
    const auto add = [&](const uint4& v) {
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = __bfloat1622float2(h[j]);
        amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
      }
    };
#pragma unroll
    for (int j = 0; j < kCachedSteps; ++j) add(cached[j]);  // zeros past K change no maximum
    for (int i = threadIdx.x * 8 + kCachedSteps * step; i < k; i += step) add(*reinterpret_cast<const uint4*>(row + i));
#pragma unroll
    for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
    __syncthreads();
    if (threadIdx.x == 0) {
      float m = 0.0f;
      for (int i = 0; i < static_cast<int>(blockDim.x / 32); ++i) m = fmaxf(m, warp_max[i]);
      row_scale = fp8_activation_scale(m);
    }
    __syncthreads();
    s = row_scale;
  }
  if (threadIdx.x == 0) scales[blockIdx.x] = s;
  const float inv = __frcp_rn(s);  // vLLM's quantizers multiply by the reciprocal too
  uint8_t* out = codes + static_cast<int64_t>(blockIdx.x) * k;
  const auto store = [&](const uint4& v, int i) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
    uint32_t packed[2] = {0, 0};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __bfloat1622float2(h[j]);
      const uint32_t lo = fp8_activation_code(f.x, inv);
      const uint32_t hi = fp8_activation_code(f.y, inv);
      packed[j / 2] |= (lo | hi << 8) << (16 * (j % 2));
    }
    *reinterpret_cast<uint2*>(out + i) = make_uint2(packed[0], packed[1]);
  };
#pragma unroll
  for (int j = 0; j < kCachedSteps; ++j) {
    const int i = threadIdx.x * 8 + j * step;
    if (i < k) store(cached[j], i);
  }
  for (int i = threadIdx.x * 8 + kCachedSteps * step; i < k; i += step) store(*reinterpret_cast<const uint4*>(row + i), i);
}

// out[t, n] = bf16(float(out[t, n]) * s_w[n] * s_x[t]): a row of tokens per blockIdx.y, 8 values (16 bytes) a thread
// (n a multiple of 8), or 2 when n is not.
__global__ void scale_fp8_products_kernel(bf16* __restrict__ out, const float* __restrict__ row_scales,
                                          const float* __restrict__ token_scales, int n, bool vec) {
  pdl_grid_sync();
  const int per = vec ? 8 : 2;
  const int c = (static_cast<int>(blockIdx.x) * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)) * per;
  if (c >= n) return;
  const float sx = token_scales[blockIdx.y];
  bf16* p = out + static_cast<int64_t>(blockIdx.y) * n + c;
  if (vec) {
    uint4 v = *reinterpret_cast<const uint4*>(p);
    const float4 a = *reinterpret_cast<const float4*>(row_scales + c);
    const float4 b = *reinterpret_cast<const float4*>(row_scales + c + 4);
    const float sw[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __bfloat1622float2(h[j]);
      h[j] = __floats2bfloat162_rn(scaled_sum(f.x, sw[2 * j], sx), scaled_sum(f.y, sw[2 * j + 1], sx));
    }
    *reinterpret_cast<uint4*>(p) = v;
  } else {
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(p);
    const float2 f = __bfloat1622float2(*h);
    *h = __floats2bfloat162_rn(scaled_sum(f.x, row_scales[c], sx), scaled_sum(f.y, row_scales[c + 1], sx));
  }
}

}  // namespace

void scale_fp8_products(bf16* out, const float* row_scales, const float* token_scales, int num_tokens, int n,
                        cudaStream_t stream) {
  if (num_tokens <= 0 || n <= 0) return;
  if (n % 2 != 0) throw_cuda_error(cudaErrorInvalidValue, "scale_fp8_products: odd N", __FILE__, __LINE__);
  const bool vec = n % 8 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0 && reinterpret_cast<uintptr_t>(row_scales) % 16 == 0;
  const int threads = 128, per_block = threads * (vec ? 8 : 2);
  constexpr int kMaxGridY = 65535;
  for (int t0 = 0; t0 < num_tokens; t0 += kMaxGridY) {
    const dim3 grid(static_cast<unsigned>((n + per_block - 1) / per_block),
                    static_cast<unsigned>(std::min(kMaxGridY, num_tokens - t0)));
    launch_kernel("scale_fp8_products", scale_fp8_products_kernel, grid, threads, 0, stream,
                  out + static_cast<int64_t>(t0) * n, row_scales, token_scales + t0, n, vec);
  }
}

void quantize_fp8_rows(const Fp8Activations& out, const bf16* x, int num_tokens, int k, float static_scale,
                       cudaStream_t stream) {
  if (num_tokens <= 0) return;
  if (k % 16 != 0) throw_cuda_error(cudaErrorInvalidValue, "quantize_fp8_rows: K not a multiple of 16", __FILE__, __LINE__);
  launch_kernel("quantize_fp8_rows", quantize_fp8_rows_kernel, static_cast<unsigned>(num_tokens), 256, 0, stream,
                out.codes, out.scales, x, k, static_scale);
}

bool fp8_w8a8_supported() { return compute_capability() >= 89; }

bool fp8_gemv_supported(const Fp8Rows& w, int num_tokens) {
  return num_tokens >= 1 && num_tokens <= kFp8GemvMaxTokens && w.n > 0 && w.k > 0 && w.k % 16 == 0 && w.codes &&
         w.scales;
}

void fp8_gemv(bf16* out, const Fp8Activations& x, const Fp8Rows& w, int num_tokens, cudaStream_t stream) {
  if (num_tokens <= 0) return;
  launch<Epilogue::kPlain>(out, x, w, num_tokens, QkvRopeOutput{}, stream);
}

void fp8_gemv_silu(bf16* out, const Fp8Activations& x, const Fp8Rows& w_gate_up, int num_tokens, cudaStream_t stream) {
  if (num_tokens <= 0) return;
  if (w_gate_up.n % 2 != 0) throw_cuda_error(cudaErrorInvalidValue, "fp8_gemv_silu: odd gate-up rows", __FILE__, __LINE__);
  launch<Epilogue::kSilu>(out, x, w_gate_up, num_tokens, QkvRopeOutput{}, stream);
}

void fp8_gemv_qkv_rope(const QkvRopeOutput& o, const Fp8Activations& x, const Fp8Rows& w_qkv, int num_tokens,
                       cudaStream_t stream) {
  if (num_tokens <= 0) return;
  if (w_qkv.n != (o.num_heads + 2 * o.num_kv_heads) * o.head_dim || o.head_dim % 2 != 0)
    throw_cuda_error(cudaErrorInvalidValue, "fp8_gemv_qkv_rope: rows do not match the heads", __FILE__, __LINE__);
  launch<Epilogue::kRope>(nullptr, x, w_qkv, num_tokens, o, stream);
}

}  // namespace pagoda::kernels
