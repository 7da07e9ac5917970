// QuantScheme: how a linear weight's bytes become values. Every scheme keeps rows by out_features (N), packed
// along in_features (K), so slicing rows (RoPE pairs, fusion) moves data, scales and zeros together.
#pragma once

#include <cstdint>
#include <string_view>

namespace pagoda {

enum class QuantScheme : uint8_t {
  // The data's dtype says it all: F32, F16, BF16, or the self-contained GGML blocks Q8_0 / Q4_0.
  kNone,
  // 4-bit codes with a scale and zero point per group of K: value = (q - z) * s.
  //   data   U8  [N, K/2]   two codes per byte along K, k even in the low nibble (k = 2j -> byte j & 0xf,
  //                         k = 2j + 1 -> byte j >> 4), as GGML's Q4 and most CPU/GPU unpackers read them
  //   scales F32 [N, groups] (groups = K / group_size)
  //   zeros  U8  [N, groups] one unsigned zero point per byte (0..15; GPTQ v1 can give 16); symmetric
  //          formats store 8
  //   g_idx  I32 [K] or empty: the group of each k when it is not k / group_size (GPTQ act-order)
  kInt4Group,
  // Signed 8-bit codes: value = (q - z) * s.
  //   data   I8  [N, K]
  //   scales F32 [N, groups] (groups = 1 per channel, K / group_size otherwise)
  //   zeros  I32 [N, groups] or empty (symmetric: z = 0); an unsigned zero point u (GPTQ: 1..256) is
  //          stored as u - 128, so I32 and not I8
  //   g_idx  I32 [K] or empty, as for kInt4Group
  kInt8Channel,
  // FP8 codes with a scale per output row, or per row and group of K: value = f8e4m3_to_f32(q) * s.
  //   data   F8_E4M3 [N, K]
  //   scales F32     [N, groups]: groups = 1 (group_size K) for per-row scales (a per-tensor scale is
  //          broadcast to every row at load); K / group_size, rounded up, for fp8's [bn, bk] blocks (each
  //          block's scale repeated on its bn rows)
  kFp8Channel,
};

std::string_view quant_scheme_name(QuantScheme scheme);

}  // namespace pagoda
