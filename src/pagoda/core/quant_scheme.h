// QuantScheme: how a linear weight's bytes become values. Every scheme keeps rows by out_features (N), packed
// along in_features (K), so slicing rows (RoPE pairs, fusion) moves data, scales and zeros (or offsets)
// together.
//
// Zero points or offsets. kInt4Group and kInt8Channel have two forms, told apart by which tensor the
// Weight holds (never by the file format it came from):
//   zeros   value = (q - z) * s     AWQ, GPTQ, compressed-tensors; GGUF Q4_0, Q5_0, Q6_K, Q8_0
//   offsets value = q * s - offset  offsets F32 [N, groups], zeros empty: GGML's "scale and min" types
//                                   (GGUF Q4_1, Q5_1: offset = -m; Q4_K, Q5_K: offset = dmin * m_sub), whose
//                                   min is not a multiple of the scale (and whose scale may be 0 with a
//                                   non-zero min), so no integer, or even finite, zero point exists
// Both are evaluated in fp32 in that order, so that values equal the format's own dequantization bit for bit.
// The CPU backend may hold the same values in smaller arrays (backend/cpu/compact_weights.h): that is its own
// prepared form, like the CUDA backend's tiles, not a form the loader makes.
#pragma once

#include <cstdint>
#include <string_view>

namespace pagoda {

enum class QuantScheme : uint8_t {
  // The data's dtype says it all: F32, F16, BF16, or the self-contained GGML blocks Q8_0 / Q4_0 (GGUF files'
  // block types, Q8_0 and Q4_0 included, are converted at load to kInt4Group / kInt8Channel).
  kNone,
  // 4-bit codes with a scale and zero point per group of K: value = (q - z) * s.
  //   data   U8  [N, K/2]   two codes per byte along K, k even in the low nibble (k = 2j -> byte j & 0xf,
  //                         k = 2j + 1 -> byte j >> 4), as GGML's Q4 and most CPU/GPU unpackers read them
  //   scales F32 [N, groups] (groups = K / group_size)
  //   zeros  U8  [N, groups] one unsigned zero point per byte (0..15; GPTQ v1 can give 16); symmetric
  //          formats store 8; empty in the offsets form
  //   offsets F32 [N, groups] or empty (see above: GGUF Q4_1, Q4_K)
  //   g_idx  I32 [K] or empty: the group of each k when it is not k / group_size (GPTQ act-order)
  kInt4Group,
  // Signed 8-bit codes: value = (q - z) * s, or q * s - offset.
  //   data    I8  [N, K]
  //   scales  F32 [N, groups] (groups = 1 per channel, K / group_size otherwise)
  //   zeros   I32 [N, groups] or empty (symmetric: z = 0)
  //   offsets F32 [N, groups] or empty (see above; then zeros is empty)
  //   g_idx   I32 [K] or empty, as for kInt4Group
  //   Unsigned codes u are stored shifted by a constant c, q = u - c, and their zero point by the same c
  //   (z = u_z - c), which leaves (q - z) unchanged: GPTQ 8-bit has c = 128 (u_z 1..256, so zeros are I32,
  //   not I8); GGUF's fixed-zero-point types use c = u_z (Q5_0: 16, Q6_K: 32), so they are symmetric and
  //   keep no zeros. In the offsets form c = 0: the 5-bit codes of Q5_1 / Q5_K (0..31) are stored as they
  //   are, one per byte.
  kInt8Channel,
  // FP8 codes with a scale per output row, or per row and group of K: value = f8e4m3_to_f32(q) * s.
  //   data   F8_E4M3 [N, K]
  //   scales F32     [N, groups]: groups = 1 (group_size K) for per-row scales (a per-tensor scale is
  //          broadcast to every row at load); K / group_size, rounded up, for fp8's [bn, bk] blocks (each
  //          block's scale repeated on its bn rows)
  kFp8Channel,
};

std::string_view quant_scheme_name(QuantScheme scheme);

// How a linear's input is quantized before the product (W8A8), as the checkpoint's quantization_config says:
// x becomes codes c = e4m3(x * (1 / s)) (round to nearest even, saturating at +-448) and the product is
// sum(c * q) * s * (the weight's scale), as vLLM's FP8 W8A8 linears compute it.
enum class ActivationQuant : uint8_t {
  kNone,         // weight-only: x stays in the compute dtype (bf16 on the GPU, fp32 on the CPU)
  kFp8PerToken,  // dynamic, one scale per token: s = max(amax(|x_token|) / 448, 1 / (448 * 512))
  kFp8Static,    // the checkpoint's input_scale, one per tensor (q, k, v and gate, up share the largest of
                 // theirs, as vLLM's fused layers: loader/model_loader.cpp)
  kInt8Block,       // CPU, weights converted from GGUF's blocks of 32 (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): x as int8 blocks of
                    // 32 and integer dot products, as llama.cpp computes its own files (its Q8_0 blocks, Q8_1 with
                    // offsets: backend/cpu/int8_lanes.h); the CUDA backend keeps bf16 inputs for these weights
  kInt8SuperBlock,  // the same for GGUF's k-quants (Q4_K, Q5_K, Q6_K): x as llama.cpp's Q8_K blocks of 256
};
// Whether `a` quantizes the inputs to FP8 (a W8A8 linear).
inline bool is_fp8_activations(ActivationQuant a) {
  return a == ActivationQuant::kFp8PerToken || a == ActivationQuant::kFp8Static;
}

// Whether `a` quantizes the inputs to int8 blocks (the CPU's products of GGUF-converted weights).
inline bool is_int8_activations(ActivationQuant a) {
  return a == ActivationQuant::kInt8Block || a == ActivationQuant::kInt8SuperBlock;
}

std::string_view activation_quant_name(ActivationQuant a);

}  // namespace pagoda
