// PrefixHistory: per-prefix request times, the blocks requests share, and which prefixes are due.
#include "pagoda/kv/prefix_history.h"

#include <algorithm>

#include "pagoda/core/check.h"

namespace pagoda {

void PrefixHistory::record(std::span<const BlockHash> chain, double now) {
  if (chain.empty() || !options_.enabled()) return;
  PAGODA_CHECK(options_.accesses >= 2 && options_.max_blocks >= 1 && options_.max_prefixes >= 1);
  const size_t tracked = std::min(chain.size(), static_cast<size_t>(options_.max_blocks));
  auto it = entries_.find(chain[0]);
  if (it == entries_.end()) {
    if (size() >= options_.max_prefixes) {  // drop the entry used least recently
      auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                     [](const auto& a, const auto& b) { return a.second.times.back() < b.second.times.back(); });
      entries_.erase(oldest);
    }
    it = entries_.emplace(chain[0], Entry{{chain.begin(), chain.begin() + static_cast<std::ptrdiff_t>(tracked)}, {}, -1}).first;
  } else {
    std::vector<BlockHash>& shared = it->second.shared;
    size_t common = 0;
    while (common < shared.size() && common < tracked && shared[common] == chain[common]) ++common;
    shared.resize(common);
  }
  std::deque<double>& times = it->second.times;
  if (!times.empty() && now - times.back() < kBurstSeconds) return;
  times.push_back(now);
  while (static_cast<int>(times.size()) > options_.accesses) times.pop_front();
}

std::vector<std::vector<BlockHash>> PrefixHistory::due(double now) {
  std::vector<std::vector<BlockHash>> out;
  for (auto& [key, e] : entries_) {
    if (static_cast<int>(e.times.size()) < options_.accesses) continue;
    bool periodic = true;
    for (size_t i = 1; i < e.times.size(); ++i) periodic = periodic && e.times[i] - e.times[i - 1] <= options_.max_interval_seconds;
    if (!periodic) continue;
    const double mean = (e.times.back() - e.times.front()) / static_cast<double>(e.times.size() - 1);
    const double expected = e.times.back() + mean;
    if (now < expected - options_.lead * mean || e.prefetched_for == expected) continue;
    e.prefetched_for = expected;
    out.push_back(e.shared);
  }
  return out;
}

}  // namespace pagoda
