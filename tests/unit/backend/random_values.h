// Random activations and weights for the CPU kernel tests: n values of a standard normal, deterministic in `seed`.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace pagoda::test {

inline std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace pagoda::test
