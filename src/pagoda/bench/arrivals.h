// When each request of a benchmark is sent: the first at 0, then gaps drawn from a gamma distribution
// with shape = burstiness and mean 1 / rate (burstiness 1: a Poisson process; below 1 burstier, above 1
// more even), as `vllm bench serve` draws them. rate = infinity: every request at 0. Seeded.
#pragma once

#include <cstdint>
#include <vector>

namespace pagoda::bench {

// Seconds from the start, non-decreasing. Throws std::invalid_argument for rate <= 0 or burstiness <= 0.
std::vector<double> arrival_times(int num_requests, double rate, double burstiness, uint64_t seed);

}  // namespace pagoda::bench
