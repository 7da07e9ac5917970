// Which vector instruction set the CPU kernels use, chosen once from CPUID at run time, so one binary runs
// on every x86-64-v3 machine and uses AVX-512 where the CPU (and the OS) has it.
//
// Each level has its own reduction order for fp32 dot products (8 lane-partial sums with AVX2, 16 with
// AVX-512), the same for every batch size: results never depend on the batch, and differ between levels
// only in the last bits. PAGODA_CPU_ISA=avx2 forces the AVX2 kernels on an AVX-512 machine (A/B runs).
#pragma once

#include <string_view>

namespace pagoda::cpu {

enum class Isa {
  kAvx2,    // x86-64-v3: AVX2, FMA, F16C (the build's baseline)
  kAvx512,  // + AVX512F/BW/VL/DQ
};

struct CpuFeatures {
  bool avx512 = false;       // F, BW, VL and DQ, with the OS saving ZMM state
  bool avx512_vnni = false;  // vpdpbusd
};

// What this CPU has (read once).
const CpuFeatures& cpu_features();

// The level the kernels use: the best the CPU has, or PAGODA_CPU_ISA's when that is lower.
Isa active_isa();
// For tests and benchmarks: use `isa` (clamped to what the CPU has) from now on; returns the level in use.
Isa set_active_isa(Isa isa);

std::string_view isa_name(Isa isa);

}  // namespace pagoda::cpu
