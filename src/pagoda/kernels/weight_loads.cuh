// How the GEMMs read weights (gemv.cu's bf16 rows, quant_gemv.cu's tiles): 16 bytes a lane, read once, so they
// skip L1 and ask L2 for 256-byte prefetches.
#pragma once

#include <cstdint>

namespace pagoda::kernels {

__device__ __forceinline__ uint4 load_weights(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

}  // namespace pagoda::kernels
