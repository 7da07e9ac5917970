// LruKEvictionPolicy: LRU-K (O'Neil, O'Neil and Weikum, SIGMOD 1993) over the prefix cache's evictable
// blocks, with each block's age scaled by its tenant's weight. A block re-used K times recently outlives
// a block used once more recently, so one scan of many one-off prompts does not flush a hot shared
// system prompt out of the cache, as it does under LRU.
//
// Definition (the brute-force reference in tests/unit/kv/test_lru_k_policy.cpp implements this text):
//   Accesses. A block's accesses are the times on_access reports: when it is published to the prefix
//   cache and each prefix hit on it, also while other sequences still reference it. Times come from the
//   policy's clock, in seconds.
//   History. The accesses form entries, in time order: an access at t joins the latest entry when
//   t - s < P, where s is that entry's first access and P the correlated-reference period
//   (LruKOptions::correlated_period_seconds); the entry's time becomes t. Otherwise t starts a new entry
//   (first access and time t). So a burst of correlated accesses (the siblings of an n > 1 request, one
//   prompt admitted twice in one step) counts once, at its latest access, and lasts at most P: a block
//   hit without pause keeps gaining entries. With P = 0 every access is an entry. (O'Neil et al. chain
//   correlation from the previous access and shift older entries by the burst's length; chaining would
//   let a block hit every few milliseconds keep one entry forever, and look cold.)
//   Distances. With t_1 > t_2 > ... the entry times, most recent first, the backward K-distance of block
//   b at time now is d_K(b) = now - t_K(b), infinite when b has fewer than K entries. t_1 is the last
//   access.
//   Weighted age. age(b) = d_K(b) / w(b), w(b) > 0 the weight given with on_evictable
//   (CachedBlockInfo::weight): a block of a weight-0.8 tenant seen 3.2 s ago has age 4; one of a
//   weight-0.3 tenant seen 12.7 s ago has age 42.3 and goes first.
//   Victim. Among the evictable blocks: those with infinite distance first, the largest
//   (now - t_1(b)) / w(b) among them; otherwise the largest age(b). Ties (equal computed ages, in
//   double) go to the lower weight, then to the lower block id.
//   A block's history is forgotten when it is evicted (its contents are gone; a recomputed copy starts
//   anew), unless its contents go to the host tier: the history goes with them (evict_with_history) and
//   is restored when they come back (restore), as if those accesses had been to the new block. A block
//   that becomes evictable with no access recorded gets one at that moment.
//
// Complexity. Within one weight, the order is by (infinite first, then t_1 or t_K ascending, then id)
// and does not change with now; between weights it does (ages grow at 1/w per second). So there is one
// ordered set per distinct weight among the evictable blocks, and evict() compares the W set heads at
// the current time: on_evictable, on_referenced and on_access are O(log n + K), evict() O(W + log n),
// where W is the number of distinct weights (tenant weights; 1 unless tenants are weighted). Exact: no
// periodic re-sorting or aging approximation.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <vector>

#include "pagoda/kv/eviction_policy.h"

namespace pagoda {

class LruKEvictionPolicy final : public EvictionPolicy {
 public:
  using Clock = std::function<double()>;  // seconds; non-decreasing
  // The steady clock, in seconds.
  static double steady_seconds();

  LruKEvictionPolicy(int num_blocks, const LruKOptions& options, Clock clock = &LruKEvictionPolicy::steady_seconds);

  void on_access(BlockId block_id, const CachedBlockInfo& info) override;
  void on_evictable(BlockId block_id, const CachedBlockInfo& info) override;
  void on_referenced(BlockId block_id) override;
  BlockId evict() override;
  BlockId evict_with_history(AccessHistory& history) override;
  AccessHistory history(BlockId block_id) const override;
  void restore(BlockId block_id, const AccessHistory& history) override;
  // In eviction order at one instant (the clock is read once).
  std::vector<BlockId> evict_all() override;
  int num_evictable() const override { return num_evictable_; }
  bool contains(BlockId block_id) const override;

  const LruKOptions& options() const { return options_; }

 private:
  // A block's place in its weight's set: infinite distance first, then by reference time, then by id.
  struct Key {
    bool finite = false;  // has K entries
    double time = 0;      // t_K when finite, else t_1 (seconds)
    BlockId block_id = 0;
    friend bool operator<(const Key& a, const Key& b) {
      if (a.finite != b.finite) return !a.finite;
      if (a.time != b.time) return a.time < b.time;
      return a.block_id < b.block_id;
    }
  };
  struct BlockState {
    int num_entries = 0;      // in [0, K]
    double entry_start = 0;   // first access of the latest entry (for correlation)
    float weight = 1.0f;      // its set while evictable
    bool evictable = false;
  };

  void record_access(BlockId block_id, double now);
  Key key_of(BlockId block_id) const;
  void insert(BlockId block_id);
  void erase(BlockId block_id);
  // The victim at `now`, without removing it.
  BlockId pick(double now) const;
  void remove_victim(BlockId block_id);

  LruKOptions options_;
  Clock clock_;
  std::vector<BlockState> blocks_;
  std::vector<double> entries_;  // [num_blocks, K]: entry times, most recent first
  std::map<float, std::set<Key>> by_weight_;  // the evictable blocks; no empty set is kept
  int num_evictable_ = 0;
};

}  // namespace pagoda
