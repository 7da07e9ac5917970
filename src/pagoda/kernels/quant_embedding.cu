// quant_embedding.h.
#include "pagoda/kernels/quant_embedding.h"

#include <cuda_fp8.h>

#include "pagoda/kernels/launch.cuh"

namespace pagoda::kernels {
namespace {

using bf16 = __nv_bfloat16;

// Value k of row `row` in fp32, as cpu::dequantize_rows evaluates it (a product and a difference, each rounded).
__device__ __forceinline__ float row_value(const QuantRowsTable& t, int64_t row, int k) {
  const int64_t g = row * t.groups + k / t.group_size;
  const float s = t.scales[g];
  switch (t.codes) {
    case QuantRowCodes::kInt4: {
      const uint8_t byte = static_cast<const uint8_t*>(t.data)[row * (t.hidden / 2) + k / 2];
      const int q = k % 2 == 0 ? byte & 0xf : byte >> 4;
      if (t.offsets != nullptr) return __fsub_rn(__fmul_rn(static_cast<float>(q), s), t.offsets[g]);
      const int z = t.zeros != nullptr ? static_cast<const uint8_t*>(t.zeros)[g] : 8;
      return __fmul_rn(static_cast<float>(q - z), s);
    }
    case QuantRowCodes::kInt8: {
      const int q = static_cast<const int8_t*>(t.data)[row * t.hidden + k];
      if (t.offsets != nullptr) return __fsub_rn(__fmul_rn(static_cast<float>(q), s), t.offsets[g]);
      const int z = t.zeros != nullptr ? static_cast<const int32_t*>(t.zeros)[g] : 0;
      return __fmul_rn(static_cast<float>(q - z), s);
    }
    case QuantRowCodes::kFp8: {
      __nv_fp8_e4m3 q;
      q.__x = static_cast<const __nv_fp8_storage_t*>(t.data)[row * t.hidden + k];
      return __fmul_rn(static_cast<float>(q), s);
    }
  }
  return 0.0f;
}

// grid = num_tokens; each thread writes pairs of values.
__global__ void quant_embedding_kernel(bf16* out, const int32_t* ids, const __grid_constant__ QuantRowsTable t) {
  pdl_grid_sync();  // before any global memory access (launch.cuh)
  const int64_t row = ids[blockIdx.x];
  __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(out + static_cast<int64_t>(blockIdx.x) * t.hidden);
  for (int k = 2 * threadIdx.x; k < t.hidden; k += 2 * blockDim.x)
    dst[k / 2] = __floats2bfloat162_rn(row_value(t, row, k), row_value(t, row, k + 1));
}

}  // namespace

void quant_embedding(bf16* out, const int32_t* ids, const QuantRowsTable& table, int num_tokens, cudaStream_t stream) {
  if (num_tokens <= 0) return;
  if (table.hidden % 2 != 0 || table.group_size <= 0 || table.groups <= 0)
    throw_cuda_error(cudaErrorInvalidValue, "quant_embedding: bad table shape", __FILE__, __LINE__);
  launch_kernel("embedding (quantized rows)", quant_embedding_kernel, dim3(num_tokens), dim3(256), 0, stream, out, ids,
                table);
}

}  // namespace pagoda::kernels
