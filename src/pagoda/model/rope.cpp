// inv_freq[i] = theta^(-2i/d), then the llama3 rule: long wavelengths divided by `factor`, short ones
// kept, and a smooth blend between low_freq_factor and high_freq_factor.
#include "pagoda/model/rope.h"

#include <cmath>
#include <numbers>

namespace pagoda {

RopeParams make_rope_params(const RopeConfig& rope, int head_dim) {
  RopeParams params;
  const int half = head_dim / 2;
  params.inv_freq.resize(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    // HF: 1.0 / (base ** (arange(0, dim, 2).float() / dim)) in float32.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    params.inv_freq[i] = 1.0f / std::pow(static_cast<float>(rope.theta), exponent);
  }
  if (rope.type == RopeType::kLlama3) {
    const double old_len = rope.original_max_position_embeddings;
    const double low_freq_wavelen = old_len / rope.low_freq_factor;
    const double high_freq_wavelen = old_len / rope.high_freq_factor;
    for (float& f : params.inv_freq) {
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen > low_freq_wavelen) {
        f = static_cast<float>(f / rope.factor);
      } else if (wavelen >= high_freq_wavelen) {
        const double smooth = (old_len / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor);
        f = static_cast<float>((1.0 - smooth) * f / rope.factor + smooth * f);
      }
    }
  }
  for (float& f : params.inv_freq) {  // see RopeConfig::inv_freq_dtype
    if (rope.inv_freq_dtype == DType::kBF16) f = bf16_to_f32(f32_to_bf16(f));
    if (rope.inv_freq_dtype == DType::kF16) f = f16_to_f32(f32_to_f16(f));
  }
  return params;
}

}  // namespace pagoda
