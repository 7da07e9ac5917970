#include "pagoda/backend/cpu/cpu_isa.h"

#include <atomic>
#include <cstdlib>
#include <string>

namespace pagoda::cpu {
namespace {

CpuFeatures detect() {
  CpuFeatures f;
  __builtin_cpu_init();
  // libgcc's checks include the OS's XSAVE state (XCR0) for AVX-512 registers.
  f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  f.avx512_vnni = f.avx512 && __builtin_cpu_supports("avx512vnni");
  return f;
}

Isa best_isa() {
  Isa isa = cpu_features().avx512 ? Isa::kAvx512 : Isa::kAvx2;
  if (const char* env = std::getenv("PAGODA_CPU_ISA"); env != nullptr && std::string(env) == "avx2") isa = Isa::kAvx2;
  return isa;
}

std::atomic<Isa>& active() {
  static std::atomic<Isa> isa{best_isa()};
  return isa;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

Isa active_isa() { return active().load(std::memory_order_relaxed); }

Isa set_active_isa(Isa isa) {
  if (isa == Isa::kAvx512 && !cpu_features().avx512) isa = Isa::kAvx2;
  active().store(isa, std::memory_order_relaxed);
  return isa;
}

std::string_view isa_name(Isa isa) { return isa == Isa::kAvx512 ? "avx512" : "avx2"; }

}  // namespace pagoda::cpu
