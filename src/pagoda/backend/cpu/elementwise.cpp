// CPU RMSNorm and RoPE: the per-token kernels, in fp32 with the same operation order as the
// references (llama2.c run.c and HF transformers' fp32 path).
#include <cmath>

#include "pagoda/backend/cpu/cpu_kernels.h"
#include "pagoda/backend/cpu/parallel.h"

namespace pagoda::cpu {

void rms_norm_f32(float* out, const float* x, const float* weight, int64_t num_rows, int64_t dim, float eps) {
  parallel_for(num_rows, num_rows * dim >= (1 << 15), [&](int64_t r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    double ss = 0.0;  // accumulate in double: the order of a float sum is not worth matching
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(dim)) + eps);
    for (int64_t i = 0; i < dim; ++i) o[i] = weight[i] * (xr[i] * inv);
  });
}

void rope_f32(float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads, int64_t head_dim,
              const float* inv_freq) {
  const int64_t half = head_dim / 2;
  parallel_for(num_tokens, num_tokens * num_heads * head_dim >= (1 << 15), [&](int64_t t) {
    const float pos = static_cast<float>(positions[t]);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = pos * inv_freq[i];
      const float c = std::cos(angle);
      const float s = std::sin(angle);
      for (int64_t h = 0; h < num_heads; ++h) {
        float* v = x + (t * num_heads + h) * head_dim;
        const float x0 = v[i];
        const float x1 = v[i + half];
        v[i] = x0 * c - x1 * s;
        v[i + half] = x1 * c + x0 * s;
      }
    }
  });
}

}  // namespace pagoda::cpu
