// The throughput-precision model behind `pagoda plan`: a step's time on the GPU from a model's shape, the
// weights' precision and the step's tokens, built from the mechanisms of Pagoda's CUDA backend rather than
// fitted per cell (docs/PERFORMANCE.md "pagoda plan" compares it with measured runs).
//
// A decode layer runs four linears (QKV and gate-up fused, O, down), decode attention and two add + RMSNorm
// kernels; after the last layer one norm and the lm_head. Each linear takes the path the backend takes at
// its token count T (rows, the decode batch padded to its CUDA graph's size):
//   bf16   T <= 8   skinny GEMM: bytes / (bandwidth x fraction) + 2nk (T - 1) / extra-token FLOP/s
//          T > 8    cuBLAS: max(bytes / bandwidth, 2nkT / (bf16 peak x efficiency)) + fixed GEMM cost
//   int8,  T <= 8   the few-token kernel where x [T rounded to 1, 2, 4 or 8, K] fits (as the skinny GEMM)
//   int8,  T <= 40  the tile GEMV in passes of 16 tokens, each streaming the weight again (as the skinny GEMM)
//   awq    T > 40   dequantize into a bf16 scratch (bound by writing its 2 B a weight), then the bf16 cuBLAS
//                   GEMM reading the scratch
//   fp8    always   the input quantized per token (one small kernel), then
//          T <= 16  the FP8 GEMV (as the skinny GEMM)
//          T > 16   cuBLASLt FP8: max(bytes / bandwidth, 2nkT / (FP8 peak x efficiency)) + fixed GEMM cost,
//                   then a pass scaling its bf16 output (one small kernel)
// The GEMV and skinny paths apply RoPE + KV store and SwiGLU in their epilogues; the library paths run them
// as two more small kernels (and their bytes). Attention per layer: a fixed cost + max(KV bytes read /
// (bandwidth x fraction of the KV dtype), 4 x heads x head_dim x query-key pairs / bf16 GEMM FLOP/s).
// Step time = the sum of all of it + the step's fixed overhead. Every constant is in DeviceProfile.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pagoda/loader/model_config.h"
#include "pagoda/plan/device_profile.h"

namespace pagoda::plan {

// The weight precisions the plan compares, as `--quantization` names them for a dummy load.
enum class Precision {
  kBf16,  // none: bf16 weights and activations
  kFp8,   // fp8: FP8 e4m3 weights per output channel, FP8 inputs per token (W8A8)
  kInt8,  // int8: signed 8-bit weights per output channel, bf16 inputs (W8A16)
  kAwq,   // awq: 4-bit weights with a scale and zero point per group of 128 (W4A16 g128)
};

inline constexpr Precision kAllPrecisions[] = {Precision::kBf16, Precision::kFp8, Precision::kInt8, Precision::kAwq};

std::string_view precision_name(Precision p);   // "bf16", "fp8", "int8", "awq"
std::string_view precision_label(Precision p);  // "bf16", "FP8 W8A8", "W8A16", "W4A16 g128"
std::optional<Precision> parse_precision(std::string_view name);

// The token limits of the backend's paths (kernels/gemv.h, quant_gemv.h, fp8_linear.h; CUDA headers, so
// repeated here) and its decode graph sizes (backend/cuda/cuda_ops.cpp: graph_size_for).
inline constexpr int kSkinnyMaxTokens = 8;
inline constexpr int kQuantGemvPassTokens = 16;
inline constexpr int kQuantGemvMaxTokens = 40;
inline constexpr int kQuantGemvFewTokensMax = 8;       // quant_gemv_few_tokens.h
inline constexpr int64_t kFewTokensMaxXBytes = 98304;  // its x [T slots, K] in bf16 beside its rings (<= 113 KB)
inline constexpr int kQuantGemmMaxTokens = 192;   // quant_gemm.h: 4- and 8-bit zeros-form tiles past the GEMV
inline constexpr int kQuantGemmBlockTokens = 64;  // its token blocks (a partial block costs a whole one)
inline constexpr int kQuantGemmWgmmaMinTokens = 65;  // quant_gemm.h: the Hopper (wgmma) form takes these steps,
inline constexpr int kQuantGemmWgmmaMaxTokens = 128;  // one block of 128 tokens
inline constexpr int kFp8GemvMaxTokens = 16;
inline constexpr int kAwqGroupSize = 128;
int64_t decode_graph_rows(int64_t sequences);  // 1, 2, 4, then multiples of 8

// The dimensions the model needs from a ModelConfig.
struct ModelShape {
  int64_t layers = 0, hidden = 0, intermediate = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;

  static ModelShape from_config(const ModelConfig& c);
};

// A linear [n, k] (out_features, in_features) of a decoder layer, in the backend's fused form.
struct Linear {
  std::string_view name;
  int64_t n = 0, k = 0;
};
std::vector<Linear> layer_linears(const ModelShape& m);  // qkv, o, gate_up, down

// Bytes of a linear's weight on the GPU as Pagoda keeps it: bf16 2 B a weight; awq and int8 in the tile layout
// of backend/mma_layout (codes, plus an fp32 {scale, zero} per row and group of 128 or per row); fp8 e4m3 rows
// padded to 16 with an fp32 scale each.
int64_t linear_weight_bytes(Precision p, int64_t n, int64_t k);
// K and V bytes of one token in one layer: bf16 2 B a value; FP8 one code a value and an exponent byte per head.
int64_t kv_bytes_per_token_layer(const ModelShape& m, bool kv_fp8);

struct PlanOptions {
  bool kv_fp8 = false;       // --kv-cache-dtype fp8
  // --quantize-lm-head: the lm_head's precision (fp8, int8 or w4: kAwq's form), bf16 otherwise whatever the layers
  Precision lm_head = Precision::kBf16;
};

// What a step computes. Decode: one token a sequence; a prompt chunk: its tokens after `before` cached ones.
struct StepShape {
  int64_t sequences = 0;
  int64_t rows = 0;            // rows through the linears (a decode batch padded to its graph's size)
  int64_t logits_rows = 0;     // rows through the lm_head
  double kv_tokens_read = 0;   // K/V rows the attention reads in one layer (prefill: once per query tile of 64)
  double attention_pairs = 0;  // (query, key) pairs the attention scores, per layer and head
};
StepShape decode_step(int64_t batch, int64_t context);
StepShape prefill_chunk(int64_t chunk, int64_t before);

// The predicted step: its time and where it goes, and what it moves and computes.
struct StepCost {
  double seconds = 0;
  double linear_s = 0;  // the layers' linears (their dequantization or input quantization included)
  double lm_head_s = 0;
  double attention_s = 0;
  double other_s = 0;           // small kernels' launches (norms, RoPE + KV store, SwiGLU, FP8 quantization and
                                // scaling, dequantization) and the norms' and epilogues' bytes; the step's overhead
  double weight_bytes = 0;      // every weight read once: linears, lm_head, norms
  double scratch_bytes = 0;     // the bf16 scratch of the dequantizing path, written and read
  double kv_bytes = 0;          // K/V read by attention
  double activation_bytes = 0;  // inputs and outputs of the kernels that do not fuse them
  double flops = 0;  // 2 x parameters x rows of the linears and lm_head, + 4 x heads x head_dim x pairs x layers
  std::string path;  // the last linear's path: "skinny", "cublas", "few-token gemv", "gemv", "gemv x3", ...
};

StepCost predict_step(const ModelShape& m, Precision p, const StepShape& s, const DeviceProfile& d,
                      const PlanOptions& o);

// A prompt of `prompt_len` tokens in chunks of at most `max_chunk` (--max-num-batched-tokens): the sum of
// its steps, the last one's logits row only.
StepCost predict_prefill(const ModelShape& m, Precision p, int64_t prompt_len, int64_t max_chunk,
                         const DeviceProfile& d, const PlanOptions& o);

// One cell of the plan: a precision at a decode batch size.
struct PlanPoint {
  Precision precision = Precision::kBf16;
  int64_t batch = 0;
  StepCost decode;
  double tokens_per_s = 0;          // all sequences
  double tokens_per_s_per_seq = 0;  // 1 / step time
  bool pareto = false;              // no other point has a step as short and more throughput, or a shorter
                                    // step and as much
};

// Marks the Pareto-optimal points of (step latency, throughput) over all of them.
void mark_pareto(std::vector<PlanPoint>& points);

}  // namespace pagoda::plan
