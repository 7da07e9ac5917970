// DeviceProfile: every constant of the throughput-precision model (plan/throughput_model.h) for one device,
// each with where it was measured. `pagoda plan --device-profile NAME` picks one; --bandwidth-gbs,
// --bf16-tflops, --fp8-tflops and --step-overhead-us override its first four.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pagoda::plan {

// A decode kernel that streams a weight once per call (Pagoda's skinny GEMM and GEMVs): the share of the
// bandwidth it reaches on the weight's bytes at one token, and the rate at which each further token of the
// call adds its FLOPs on top (measured: their time grows about linearly with the tokens from the first).
struct StreamingKernel {
  double bandwidth_fraction = 1.0;
  double extra_token_tflops = 0.0;
};

struct DeviceProfile {
  std::string name;
  // The roofline.
  double bandwidth_gbs = 0;     // HBM bytes per second (GB = 1e9) that a stream of reads reaches
  double bf16_tflops = 0;       // dense bf16 tensor-core peak
  double fp8_tflops = 0;        // dense FP8 tensor-core peak
  double step_overhead_us = 0;  // host and stream work of a decode step outside its kernels
  // Fixed costs of a launch.
  double small_kernel_us = 0;     // a norm, quantization, RoPE, SwiGLU or scale kernel at decode sizes
  double attention_fixed_us = 0;  // decode attention and its span merge for one layer, KV bytes aside
  double gemm_fixed_us = 0;       // a cuBLAS / cuBLASLt GEMM: launch, ramp and tail beyond its roofline
  // The decode kernels that stream weights (up to their token limits: plan/throughput_model.h).
  StreamingKernel skinny_bf16;  // bf16 skinny GEMM, <= 8 tokens
  StreamingKernel gemv_int4;    // 4-bit tiles on mma.sync (W4A16), <= 16 tokens a pass
  StreamingKernel gemv_int8;    // int8 tiles on mma.sync (W8A16), <= 16 tokens a pass
  StreamingKernel few_int4;     // the few-token kernel on 4-bit tiles, <= 8 tokens where x fits
  StreamingKernel few_int8;     // the same on int8 tiles
  StreamingKernel gemv_fp8;     // FP8 W8A8 GEMV (mma.sync e4m3), <= 16 tokens
  // What the library GEMMs reach of the peaks on a model's shapes.
  double bf16_gemm_efficiency = 1.0;  // cuBLAS bf16, of bf16_tflops (prefill attention too)
  double fp8_gemm_efficiency = 1.0;   // cuBLASLt FP8, of fp8_tflops
  // Bandwidth shares of the other memory-bound kernels.
  double dequant_write_fraction = 1.0;   // the tiles -> bf16 scratch pass, bound by its bf16 writes
  double quant_gemm_int4_tflops = 0;     // quant_gemm: its rate on whole 64-token blocks (FLOPs of the blocks)
  double quant_gemm_int8_tflops = 0;     // the same on int8 tiles
  double quant_gemm_fixed_us = 0;        // quant_gemm: per call beyond that (ramp, tail, K slices added up)
  double quant_gemm_wgmma_int4_tflops = 0;  // its Hopper form (65-128 tokens) on a whole 128-token block, 4-bit
  double quant_gemm_wgmma_int8_tflops = 0;  // the same on int8 tiles (the fixed cost as above)
  double attention_bf16_fraction = 1.0;  // decode attention reading a bf16 KV cache
  double attention_fp8_fraction = 1.0;   // decode attention reading an FP8 KV cache (codes converted in registers)
};

// One NVIDIA H200 (141 GB HBM3e), as Pagoda measured it: device_profile.cpp gives each figure's source.
DeviceProfile h200_profile();

// The built-in profile called `name`; an Error listing the known names otherwise.
DeviceProfile device_profile(std::string_view name);
std::vector<std::string> device_profile_names();

}  // namespace pagoda::plan
