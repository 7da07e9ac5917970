// The random numbers of dummy weights (LoadFormat::kDummy): a splitmix64 stream per chunk of work and the
// cheap distributions built on it, shared by the unquantized fill (dummy_weights.cpp) and the quantized one
// (dummy_quant_weights.cpp).
#pragma once

#include <cstdint>

namespace pagoda::dummy {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The stream of one chunk, keyed by (seed, tensor, chunk start): the same values whichever thread fills it.
inline uint64_t chunk_stream(uint64_t seed, uint64_t tensor_index, int64_t begin) {
  uint64_t state =
      seed ^ (tensor_index * 0xd1b54a32d192ed03ull) ^ (static_cast<uint64_t>(begin) * 0x8cb92ba72f3d8dd7ull);
  splitmix64(state);
  return state;
}

// Approximately N(0, 1): the sum of four 16-bit uniforms (Irwin-Hall, variance 4/12) rescaled. One hash per
// value and no transcendental functions, so billions of values fill quickly; the tails stop at ~3.5 sigma,
// which does not matter for weights that only exist to be timed.
inline float approx_normal(uint64_t bits) {
  const uint64_t sum = (bits & 0xffff) + ((bits >> 16) & 0xffff) + ((bits >> 32) & 0xffff) + (bits >> 48);
  constexpr float kScale = 1.7320508f / 65536.0f;  // sqrt(3) / 2^16
  return (static_cast<float>(sum) - 2.0f * 65535.0f) * kScale;
}

}  // namespace pagoda::dummy
