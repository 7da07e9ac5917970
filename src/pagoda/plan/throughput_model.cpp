// The step-time model: each linear's path and cost, the layer's other kernels, the lm_head, the step.
#include "pagoda/plan/throughput_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "pagoda/backend/mma_layout/quant_tiles_shape.h"

namespace pagoda::plan {

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp8:
      return "fp8";
    case Precision::kInt8:
      return "int8";
    case Precision::kAwq:
      return "awq";
  }
  return "?";
}

std::string_view precision_label(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp8:
      return "FP8 W8A8";
    case Precision::kInt8:
      return "W8A16";
    case Precision::kAwq:
      return "W4A16 g128";
  }
  return "?";
}

std::optional<Precision> parse_precision(std::string_view name) {
  for (Precision p : kAllPrecisions)
    if (precision_name(p) == name) return p;
  if (name == "none") return Precision::kBf16;
  return std::nullopt;
}

int64_t decode_graph_rows(int64_t sequences) {
  if (sequences <= 1) return 1;
  if (sequences <= 2) return 2;
  if (sequences <= 4) return 4;
  return (sequences + 7) / 8 * 8;
}

ModelShape ModelShape::from_config(const ModelConfig& c) {
  return {.layers = c.num_layers,
          .hidden = c.hidden_size,
          .intermediate = c.intermediate_size,
          .heads = c.num_heads,
          .kv_heads = c.num_kv_heads,
          .head_dim = c.head_dim,
          .vocab = c.vocab_size};
}

std::vector<Linear> layer_linears(const ModelShape& m) {
  return {{"qkv", (m.heads + 2 * m.kv_heads) * m.head_dim, m.hidden},
          {"o", m.hidden, m.heads * m.head_dim},
          {"gate_up", 2 * m.intermediate, m.hidden},
          {"down", m.hidden, m.intermediate}};
}

int64_t linear_weight_bytes(Precision p, int64_t n, int64_t k) {
  switch (p) {
    case Precision::kBf16:
      return 2 * n * k;
    case Precision::kAwq:
    case Precision::kInt8: {
      QuantTilesShape tiles;
      tiles.codes = p == Precision::kAwq ? TileCodes::kU4 : TileCodes::kI8;
      tiles.n = n;
      tiles.k = k;
      tiles.group_size = p == Precision::kAwq ? std::min<int64_t>(kAwqGroupSize, k) : k;  // int8: per row
      return tiles.code_bytes() + tiles.param_floats() * static_cast<int64_t>(sizeof(float));
    }
    case Precision::kFp8: {
      const int64_t rows = (n + kTileRows - 1) / kTileRows * kTileRows;  // kFp8RowAlignment, kernels/fp8_linear.h
      return rows * k + rows * static_cast<int64_t>(sizeof(float));
    }
  }
  return 0;
}

int64_t kv_bytes_per_token_layer(const ModelShape& m, bool kv_fp8) {
  const int64_t per_head = kv_fp8 ? m.head_dim + 1 : 2 * m.head_dim;  // kv/kv_fp8.h: codes + an exponent byte
  return 2 * m.kv_heads * per_head;                                   // K and V
}

StepShape decode_step(int64_t batch, int64_t context) {
  StepShape s;
  s.sequences = batch;
  s.rows = decode_graph_rows(batch);
  s.logits_rows = s.rows;
  s.kv_tokens_read = static_cast<double>(batch) * static_cast<double>(context);
  s.attention_pairs = s.kv_tokens_read;
  return s;
}

StepShape prefill_chunk(int64_t chunk, int64_t before) {
  constexpr int64_t kQueryTile = 64;  // kernels/paged_attention_prefill.cu: a block per 64 queries and head
  StepShape s;
  s.sequences = 1;
  s.rows = chunk;
  s.logits_rows = 0;
  for (int64_t q = 0; q < chunk; q += kQueryTile)  // each tile reads the keys up to its last query (causal)
    s.kv_tokens_read += static_cast<double>(before + std::min(q + kQueryTile, chunk));
  const double c = static_cast<double>(chunk);
  s.attention_pairs = c * static_cast<double>(before) + c * (c + 1) / 2;
  return s;
}

namespace {

struct LinearCost {
  double seconds = 0;
  int small_kernels = 0;
  double scratch_bytes = 0;
  double activation_bytes = 0;
  bool fused_epilogues = true;  // RoPE + KV store and SwiGLU in the GEMM's epilogue
  std::string path;
};

double bytes_per_s(const DeviceProfile& d) { return d.bandwidth_gbs * 1e9; }

// The skinny GEMM and the GEMVs: the weight streamed once, and each token past the first adding its FLOPs.
double streaming_seconds(const StreamingKernel& kernel, double weight_bytes, const Linear& l, int64_t tokens,
                         const DeviceProfile& d) {
  const double extra_flops = 2.0 * static_cast<double>(l.n * l.k) * static_cast<double>(tokens - 1);
  return weight_bytes / (bytes_per_s(d) * kernel.bandwidth_fraction) + extra_flops / (kernel.extra_token_tflops * 1e12);
}

// Whether the few-token kernel takes T tokens of K columns: x for T rounded up to 1, 2, 4 or 8 fits its share of
// shared memory.
bool few_tokens_fit(int64_t t, int64_t k) {
  const int64_t slots = t <= 2 ? t : t <= 4 ? 4 : 8;
  return t >= 1 && t <= kQuantGemvFewTokensMax && slots * k * 2 <= kFewTokensMaxXBytes;
}

// cuBLAS / cuBLASLt: a roofline and a fixed cost.
double library_gemm_seconds(double bytes, double flops, double tflops, const DeviceProfile& d) {
  return std::max(bytes / bytes_per_s(d), flops / (tflops * 1e12)) + d.gemm_fixed_us * 1e-6;
}

LinearCost linear_cost(Precision p, const Linear& l, int64_t t, const DeviceProfile& d) {
  const double w = static_cast<double>(linear_weight_bytes(p, l.n, l.k));
  const double tokens = static_cast<double>(t);
  const double flops = 2.0 * static_cast<double>(l.n * l.k) * tokens;
  const double bf16_io = 2.0 * tokens * static_cast<double>(l.k + l.n);  // bf16 input read, output written
  const double bf16_tflops = d.bf16_tflops * d.bf16_gemm_efficiency;
  const double bw = bytes_per_s(d);
  LinearCost c;
  switch (p) {
    case Precision::kBf16:
      if (t <= kSkinnyMaxTokens) {
        c.seconds = streaming_seconds(d.skinny_bf16, w, l, t, d);
        c.path = "skinny";
      } else {
        c.seconds = library_gemm_seconds(w + bf16_io, flops, bf16_tflops, d);
        c.activation_bytes = bf16_io;
        c.fused_epilogues = false;
        c.path = "cublas";
      }
      break;
    case Precision::kInt8:
    case Precision::kAwq:
      if (few_tokens_fit(t, l.k)) {
        c.seconds = streaming_seconds(p == Precision::kAwq ? d.few_int4 : d.few_int8, w, l, t, d);
        c.path = "few-token gemv";
      } else if (t <= kQuantGemvMaxTokens) {
        const StreamingKernel& kernel = p == Precision::kAwq ? d.gemv_int4 : d.gemv_int8;
        int passes = 0;
        for (int64_t left = t; left > 0; left -= kQuantGemvPassTokens, ++passes)
          c.seconds += streaming_seconds(kernel, w, l, std::min<int64_t>(left, kQuantGemvPassTokens), d);
        c.path = passes == 1 ? "gemv" : fmt::format("gemv x{}", passes);
      } else if (t <= kQuantGemmMaxTokens) {
        // 65 to 128 tokens: the wgmma form's one block of 128; otherwise blocks of 64 on mma.sync
        const bool wgmma = t >= kQuantGemmWgmmaMinTokens && t <= kQuantGemmWgmmaMaxTokens;
        const int64_t block = wgmma ? kQuantGemmWgmmaMaxTokens : kQuantGemmBlockTokens;
        const double block_flops = 2.0 * static_cast<double>(l.n * l.k) * static_cast<double>((t + block - 1) / block * block);
        const double tflops = wgmma ? (p == Precision::kAwq ? d.quant_gemm_wgmma_int4_tflops : d.quant_gemm_wgmma_int8_tflops)
                                    : (p == Precision::kAwq ? d.quant_gemm_int4_tflops : d.quant_gemm_int8_tflops);
        c.seconds = std::max(w / bw, block_flops / (tflops * 1e12)) + d.quant_gemm_fixed_us * 1e-6;
        c.activation_bytes = bf16_io;
        c.fused_epilogues = false;
        c.path = wgmma ? "quant gemm (wgmma)" : "quant gemm";
      } else {
        const double scratch = 2.0 * static_cast<double>(l.n * l.k);  // bf16, written then read by the GEMM
        c.seconds = std::max(w / bw, scratch / (bw * d.dequant_write_fraction)) +
                    library_gemm_seconds(scratch + bf16_io, flops, bf16_tflops, d);
        c.small_kernels = 1;
        c.scratch_bytes = 2 * scratch;
        c.activation_bytes = bf16_io;
        c.fused_epilogues = false;
        c.path = "dequant+cublas";
      }
      break;
    case Precision::kFp8: {
      const double quantize_io = 3.0 * tokens * static_cast<double>(l.k);  // bf16 in, e4m3 codes out
      c.seconds = quantize_io / bw;
      c.small_kernels = 1;
      c.activation_bytes = quantize_io;
      if (t <= kFp8GemvMaxTokens) {
        c.seconds += streaming_seconds(d.gemv_fp8, w, l, t, d);
        c.path = "fp8 gemv";
      } else {
        const double gemm_io = tokens * static_cast<double>(l.k) + 2.0 * tokens * static_cast<double>(l.n);
        const double scale_io = 4.0 * tokens * static_cast<double>(l.n);  // the unscaled bf16 sums, read and written
        c.seconds += library_gemm_seconds(w + gemm_io, flops, d.fp8_tflops * d.fp8_gemm_efficiency, d) + scale_io / bw;
        c.small_kernels = 2;
        c.activation_bytes += gemm_io + scale_io;
        c.fused_epilogues = false;
        c.path = "cublaslt fp8";
      }
      break;
    }
  }
  return c;
}

}  // namespace

StepCost predict_step(const ModelShape& m, Precision p, const StepShape& s, const DeviceProfile& d,
                      const PlanOptions& o) {
  const double bw = bytes_per_s(d);
  const double rows = static_cast<double>(s.rows);
  const double layers = static_cast<double>(m.layers);
  StepCost cost;

  // One layer (every layer is the same). Small kernels: two add + RMSNorm, each reading x and the residual
  // and writing both (bf16), and whatever the linears' paths add.
  int layer_small = 2;
  double small_io = 2 * 4 * rows * static_cast<double>(m.hidden) * 2;
  double linear_s = 0;
  bool fused = true;
  for (const Linear& l : layer_linears(m)) {
    const LinearCost c = linear_cost(p, l, s.rows, d);
    linear_s += c.seconds;
    cost.weight_bytes += layers * static_cast<double>(linear_weight_bytes(p, l.n, l.k));
    cost.scratch_bytes += layers * c.scratch_bytes;
    cost.activation_bytes += layers * c.activation_bytes;
    cost.flops += layers * 2.0 * static_cast<double>(l.n * l.k) * rows;
    layer_small += c.small_kernels;
    fused = fused && c.fused_epilogues;
    cost.path = c.path;
  }
  if (!fused) {  // RoPE + KV store over the QKV output and SwiGLU over gate-up's, as kernels of their own
    const double qkv = static_cast<double>((m.heads + 2 * m.kv_heads) * m.head_dim);
    small_io += rows * qkv * 2 * 2 + rows * static_cast<double>(3 * m.intermediate) * 2;
    layer_small += 2;
  } else if (o.kv_fp8) {
    layer_small += 1;  // an FP8 row's exponent needs the row's amax: the store leaves the QKV epilogue
  }
  cost.activation_bytes += layers * small_io;

  // Attention: K/V read at the KV dtype's share of the bandwidth, or the scores' FLOPs, whichever is longer.
  const double kv_bytes = s.kv_tokens_read * static_cast<double>(kv_bytes_per_token_layer(m, o.kv_fp8));
  const double attention_flops = 4.0 * static_cast<double>(m.heads * m.head_dim) * s.attention_pairs;
  const double kv_fraction = o.kv_fp8 ? d.attention_fp8_fraction : d.attention_bf16_fraction;
  const double attention_s =
      d.attention_fixed_us * 1e-6 +
      std::max(kv_bytes / (bw * kv_fraction), attention_flops / (d.bf16_tflops * d.bf16_gemm_efficiency * 1e12));
  cost.kv_bytes = layers * kv_bytes;
  cost.flops += layers * attention_flops;
  cost.linear_s = layers * linear_s;
  cost.attention_s = layers * attention_s;

  // Norms: two a layer and the final one. The lm_head over the rows that are sampled: bf16 unless
  // --quantize-lm-head says otherwise, whatever the layers' precision.
  cost.weight_bytes += static_cast<double>((2 * m.layers + 1) * m.hidden * 2);
  int small_kernels = m.layers * layer_small + 1;
  const Precision head = o.lm_head;
  cost.weight_bytes += static_cast<double>(linear_weight_bytes(head, m.vocab, m.hidden));
  if (s.logits_rows > 0) {
    const LinearCost c = linear_cost(head, Linear{"lm_head", m.vocab, m.hidden}, s.logits_rows, d);
    cost.lm_head_s = c.seconds;
    cost.activation_bytes += c.activation_bytes;
    cost.flops += 2.0 * static_cast<double>(m.vocab * m.hidden) * static_cast<double>(s.logits_rows);
    small_kernels += c.small_kernels;
  }
  cost.other_s = d.step_overhead_us * 1e-6 + small_kernels * d.small_kernel_us * 1e-6 + layers * small_io / bw;
  cost.seconds = cost.linear_s + cost.lm_head_s + cost.attention_s + cost.other_s;
  return cost;
}

StepCost predict_prefill(const ModelShape& m, Precision p, int64_t prompt_len, int64_t max_chunk,
                         const DeviceProfile& d, const PlanOptions& o) {
  StepCost total;
  for (int64_t before = 0; before < prompt_len; before += max_chunk) {
    StepShape s = prefill_chunk(std::min(max_chunk, prompt_len - before), before);
    if (before + max_chunk >= prompt_len) s.logits_rows = 1;  // the last chunk samples the first token
    const StepCost c = predict_step(m, p, s, d, o);
    total.seconds += c.seconds;
    total.linear_s += c.linear_s;
    total.lm_head_s += c.lm_head_s;
    total.attention_s += c.attention_s;
    total.other_s += c.other_s;
    total.weight_bytes += c.weight_bytes;
    total.scratch_bytes += c.scratch_bytes;
    total.kv_bytes += c.kv_bytes;
    total.activation_bytes += c.activation_bytes;
    total.flops += c.flops;
    total.path = c.path;
  }
  return total;
}

void mark_pareto(std::vector<PlanPoint>& points) {
  for (PlanPoint& a : points) {
    a.pareto = true;
    for (const PlanPoint& b : points) {
      const bool no_worse = b.decode.seconds <= a.decode.seconds && b.tokens_per_s >= a.tokens_per_s;
      const bool better = b.decode.seconds < a.decode.seconds || b.tokens_per_s > a.tokens_per_s;
      if (&a != &b && no_worse && better) {
        a.pareto = false;
        break;
      }
    }
  }
}

}  // namespace pagoda::plan
