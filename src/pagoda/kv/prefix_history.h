// PrefixHistory: when prompts that start with the same cached block arrive, and which leading blocks they
// all share, so that a prefix used periodically can be brought back from the host KV tier before its next
// request (BlockManager::prefetch). A prefix is periodic once `accesses` requests started with it at
// intervals of at most max_interval_seconds; its next request is expected one mean interval after the last,
// and it is due for prefetch from `lead` of that interval before. Each expected request is prefetched for
// once. Requests less than kBurstSeconds apart count as one access (a burst is not a period). Bounded:
// at most max_prefixes entries, the least recently used one dropped first. Engine thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <vector>

#include "pagoda/kv/block_hash.h"

namespace pagoda {

struct PrefetchOptions {
  double max_interval_seconds = 0;  // 0: no prefetch (--kv-prefetch-interval-ms)
  int accesses = 3;                 // requests (so accesses - 1 intervals) that make a prefix periodic, >= 2
  double lead = 0.5;                // due from this fraction of the mean interval before the next request
  int max_blocks = 64;              // leading blocks of a prefix that are tracked and brought back
  int max_prefixes = 1024;

  bool enabled() const { return max_interval_seconds > 0; }
};

class PrefixHistory {
 public:
  static constexpr double kBurstSeconds = 0.010;

  explicit PrefixHistory(const PrefetchOptions& options) : options_(options) {}

  // A request whose prompt's full blocks have these chained hashes (the first is the key) began at `now`
  // (seconds, non-decreasing). The prefix tracked is what every recorded request shared.
  void record(std::span<const BlockHash> chain, double now);
  // The shared blocks of every prefix due for prefetch at `now`, each expected request once.
  std::vector<std::vector<BlockHash>> due(double now);
  void clear() { entries_.clear(); }
  int size() const { return static_cast<int>(entries_.size()); }

 private:
  struct Entry {
    std::vector<BlockHash> shared;  // the leading blocks every recorded request had
    std::deque<double> times;       // the last `accesses` request times
    double prefetched_for = -1;     // the expected time already prefetched for
  };

  PrefetchOptions options_;
  std::unordered_map<BlockHash, Entry, BlockHashHasher> entries_;
};

}  // namespace pagoda
