// When each request of a benchmark is sent: the first at 0, then gaps drawn from a gamma distribution
// with shape = burstiness and mean 1 / rate (burstiness 1: a Poisson process; below 1 burstier, above 1
// more even), as `vllm bench serve` draws them. rate = infinity: every request at 0. Seeded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pagoda::bench {

// Seconds from the start, non-decreasing. Throws std::invalid_argument for rate <= 0 or burstiness <= 0.
std::vector<double> arrival_times(int num_requests, double rate, double burstiness, uint64_t seed);

// A piecewise-constant load (--request-rate-schedule "4:20,32:20,4:20": rate in requests per second, then
// seconds at it). Phases follow each other from 0; the last one's rate goes on if requests are left.
struct RatePhase {
  double rate = 0;
  double seconds = 0;
};
// Throws std::invalid_argument naming the bad piece.
std::vector<RatePhase> parse_rate_schedule(const std::string& spec);
// Arrivals under a schedule: gaps drawn at the rate of the phase the previous arrival fell in; a gap that
// crosses into the next phase is redrawn from the boundary at that phase's rate (memoryless for Poisson).
std::vector<double> arrival_times(int num_requests, const std::vector<RatePhase>& schedule, double burstiness,
                                  uint64_t seed);
// The phase an arrival at `t` belongs to (the last one past the schedule's end).
size_t phase_of(const std::vector<RatePhase>& schedule, double t);

}  // namespace pagoda::bench
