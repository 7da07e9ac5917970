// The built-in device profiles. Every H200 figure comes from a measurement kept in this repository (or a
// datasheet where none was made), named next to it; none is fitted to the decode table that
// tests/unit/plan checks the model against, except where a comment says which other measurement it was
// solved from.
#include "pagoda/plan/device_profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pagoda/core/error.h"

namespace pagoda::plan {

DeviceProfile h200_profile() {
  DeviceProfile p;
  p.name = "h200";
  // docs/PERFORMANCE.md "GPU: Llama-3-8B shape on an H200": the measured copy bandwidth (the lm_head's skinny
  // GEMM alone streams 4.29 TB/s, bench/results/2026-12-01-h200-fp8-w8a8/gpu-tests-bandwidth.log).
  p.bandwidth_gbs = 4200;
  // Dense bf16 on cuBLAS as measured on the H200 (the datasheet says 989); no log of it is kept in
  // bench/results. What the model uses is this times bf16_gemm_efficiency (below).
  p.bf16_tflops = 790;
  // The H200 datasheet's dense FP8 (no sparsity).
  p.fp8_tflops = 1979;
  // PERFORMANCE "Current figures (commit 3fe15b3)": the stream's work between decode graph replays adds
  // 29-31 us a token (median TPOT minus the replay's GPU time).
  p.step_overhead_us = 30;
  // DecodeStepProfile.Llama3_8B_Batch1 (gpu-tests-bandwidth.log above): add + RMSNorm 1.78 us a launch at
  // one token, nearly all of it fixed cost.
  p.small_kernel_us = 1.78;
  // The same profile: decode attention + merge 5.47 us a layer at 128 context, less its 0.5 MB of KV at
  // attention_bf16_fraction of the bandwidth.
  p.attention_fixed_us = 5.33;
  // Fp8Linear.PrintsBandwidthOnLlamaShapes (same log): cuBLASLt at 32 tokens on the four Llama-3-8B linears
  // takes 83.35 us a layer where their 218.3 MB need 51.98 us at the bandwidth: 7.84 us a GEMM more.
  p.gemm_fixed_us = 7.84;
  // DecodeStepProfile (same log): the five batch-1 GEMMs of a step take 3,693.9 us for 15.01 GB (4.06 TB/s).
  // SkinnyGemm.PrintsBandwidthOnLlamaShapes: a layer's four GEMMs take 110.30 us at 1 token and 148.32 at 8,
  // 3.05 GFLOP more in 38.02 us.
  p.skinny_bf16 = {0.967, 80.3};
  // QuantGemv.PrintsBandwidthOnLlamaShapes (same log), a layer's four linears at 1 and at 16 tokens:
  // 4-bit g128 tiles 122.7 MB in 62.47 us (1.96 TB/s), 109.35 us at 16 tokens (6.54 GFLOP more in 46.88 us);
  // int8 tiles 218.4 MB in 82.81 us (2.64 TB/s), 119.87 us at 16.
  p.gemv_int4 = {0.468, 139.6};
  p.gemv_int8 = {0.628, 176.6};
  // The same test on the few-token kernel (bench/results/2026-12-04-h200-w4-few-tokens/gtest-final.log): a layer's
  // four linears at 1 token, 4-bit 46.29 us (2.65 TB/s), int8 72.30 us (3.02 TB/s); QKV, O and gate-up (x of 8
  // tokens fits beside a second block only for K = 4,096) from 1 to 8 tokens, 2.23 GFLOP more in 10.34 us (4-bit)
  // and 8.48 us (int8).
  p.few_int4 = {0.631, 215.8};
  p.few_int8 = {0.719, 263.1};
  // Fp8Linear.PrintsBandwidthOnLlamaShapes: FP8 rows 218.3 MB in 68.37 us (3.19 TB/s), 76.15 us at 16 tokens.
  p.gemv_fp8 = {0.760, 841.0};
  // Solved from the bf16 1,024-token prefill (PERFORMANCE "Current figures": TTFT 26.0 ms), which this
  // model then predicts at 26.1 ms: cuBLAS at about 630 TFLOP/s on these shapes.
  p.bf16_gemm_efficiency = 0.80;
  // Fp8Linear.PrintsBandwidthOnLlamaShapes: cuBLASLt FP8 at 1,024 tokens, a layer's 446.7 GFLOP in 432.83 us,
  // 401.45 us without the four GEMMs' fixed cost: 1,113 TFLOP/s, 0.562 of the datasheet's figure.
  p.fp8_gemm_efficiency = 0.562;
  // Solved from the 128-token prefills of bench/results/2026-12-01-h200-fp8-w8a8/qbench_{none,awq,int8}_b1.json
  // (TTFT 6.04, 12.71, 12.77 ms): the scratch path costs W4 and W8 alike 6.7 ms more than bf16, the time of
  // writing the 13.96 GB of bf16 scratch at 2.08 TB/s, whatever they read.
  p.dequant_write_fraction = 0.5;
  // QuantGemm.PrintsTimesOnLlamaShapes (bench/results/2026-12-05-h200-quant-gemm/d-final-kernel-table.txt), 4-bit
  // g128 at 64 and 128 tokens: gate-up and down (large grids) at 226-242 and 200-236 TFLOP/s; QKV and O (K cut into
  // slices, then added) 6-14 us slower than that rate. 250 TFLOP/s and 6 us a call give a layer's four GEMMs at 64
  // tokens 135.7 us (measured 135.3) and at 128 tokens 247.3 us (266.0). int8 per row: the same four at 64 tokens in
  // 140.96 us against 135.31 (0.96x).
  p.quant_gemm_int4_tflops = 250;
  p.quant_gemm_int8_tflops = 240;
  p.quant_gemm_fixed_us = 6;
  // The Hopper form, bench/results/2026-12-05-h200-quant-wgmma/b-first-form-table.log at 128 tokens: a layer's
  // four products (55.83 GFLOP) in 223.41 us (4-bit g128) and 240.69 us (int8 per row); less 6 us a call, 280 and
  // 258 TFLOP/s. Decode with it against the mma.sync form at 80-128 sequences: +13-16% (4-bit), +10% (int8)
  // (bench/results/2026-12-05-h200-session28/band-wgmma-*.txt).
  p.quant_gemm_wgmma_int4_tflops = 280;
  p.quant_gemm_wgmma_int8_tflops = 258;
  // docs/PERFORMANCE.md "GPU: FP8 KV decode from registers", the attention kernel alone at 64 x 4,096 and
  // 256 x 1,024: bf16 KV read at 3.86-3.88 TB/s, FP8 KV at 2.99-3.00.
  p.attention_bf16_fraction = 0.92;
  p.attention_fp8_fraction = 0.71;
  return p;
}

std::vector<std::string> device_profile_names() { return {"h200"}; }

DeviceProfile device_profile(std::string_view name) {
  if (name == "h200") return h200_profile();
  throw Error(fmt::format("unknown device profile \"{}\" (known: {})", name, fmt::join(device_profile_names(), ", ")));
}

}  // namespace pagoda::plan
