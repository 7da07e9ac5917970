// EvictionPolicy: which cached-but-unreferenced KV block to give up when a fresh block is needed.
// The block pool tells the policy when a cached block is accessed (published, or a prefix hit), when it
// becomes evictable (its last reference dropped) and when it is referenced again; the policy picks
// victims. LRU (here) and LRU-K with tenant weights (lru_k_policy.h) are implemented.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "pagoda/kv/block_id.h"

namespace pagoda {

// What the pool knows about a cached block, for policies that weigh more than recency (LRU-K keeps
// its own access history from on_access calls and scales ages by weight).
struct CachedBlockInfo {
  int chain_index = 0;    // position of the block in its sequence (0 = first block)
  uint64_t salt_key = 0;  // see salt_key() in block_hash.h
  float weight = 1.0f;    // the tenant's priority weight, in (0, inf): a larger weight keeps blocks longer
  int tenant = -1;        // the scheduler's index of the tenant, for per-tenant counts (-1: none)
};

// A block's access history as an LRU-K policy keeps it: its entry times, most recent first (LRU keeps
// none). It travels with the block's contents: evicted to the host tier with them, and restored when they
// come back (a host hit, a prefetch), so a block brought back is as hot as when it left.
constexpr int kMaxAccessHistory = 8;
struct AccessHistory {
  int count = 0;
  std::array<double, kMaxAccessHistory> times{};  // seconds, the policy's clock
};

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;

  // `block_id` (cached) was accessed: just published, or a prefix hit on it, also while other sequences
  // still reference it. Called after on_referenced when the hit takes it out of the evictable set.
  // Policies that order by recency of freeing alone (LRU) ignore it.
  virtual void on_access(BlockId block_id, const CachedBlockInfo& info) {}

  // `block_id` (cached, reference count now 0) may be evicted from now on.
  virtual void on_evictable(BlockId block_id, const CachedBlockInfo& info) = 0;
  // `block_id`, evictable until now, was referenced again and must leave the evictable set.
  virtual void on_referenced(BlockId block_id) = 0;
  // Chooses a victim among the evictable blocks and removes it from the set. Requires num_evictable() > 0.
  virtual BlockId evict() = 0;
  // evict(), with the victim's history before it is forgotten (empty for policies that keep none).
  virtual BlockId evict_with_history(AccessHistory& history) {
    history = {};
    return evict();
  }
  // The history of a block the policy knows (evictable or referenced); empty when it keeps none.
  virtual AccessHistory history(BlockId /*block_id*/) const { return {}; }
  // `block_id`, not evictable and with no accesses since it was evicted or last free, takes `history` as if its
  // accesses had been recorded: contents back from the host tier. Call before its first access.
  virtual void restore(BlockId /*block_id*/, const AccessHistory& /*history*/) {}
  // Drops every evictable block at once (prefix cache reset); returns them in eviction order.
  virtual std::vector<BlockId> evict_all() = 0;

  virtual int num_evictable() const = 0;
  virtual bool contains(BlockId block_id) const = 0;
};

enum class EvictionPolicyKind : uint8_t { kLru, kLruK };

// Parameters of LruKEvictionPolicy (lru_k_policy.h has the exact definition).
struct LruKOptions {
  int k = 2;  // the K-th most recent access decides, in [1, kMaxK]; 1 is LRU by last access
  // Accesses less than this after the first access of a block's latest history entry merge into it.
  // 10 ms: the accesses of one scheduling pass (a request's n > 1 siblings, a block published and hit
  // in the same step) are microseconds apart and count once; re-use driven by clients (a chat's next
  // turn, another request with the same system prompt) comes later than that and counts.
  double correlated_period_seconds = 0.010;
  static constexpr int kMaxK = kMaxAccessHistory;
};

// Least recently freed first. O(1) per call: an intrusive doubly linked list over block ids.
class LruEvictionPolicy final : public EvictionPolicy {
 public:
  explicit LruEvictionPolicy(int num_blocks);

  void on_evictable(BlockId block_id, const CachedBlockInfo& info) override;
  void on_referenced(BlockId block_id) override;
  BlockId evict() override;
  std::vector<BlockId> evict_all() override;
  int num_evictable() const override { return num_evictable_; }
  bool contains(BlockId block_id) const override;

 private:
  void unlink(BlockId block_id);

  // Node i < num_blocks is block i; node num_blocks is the sentinel (next = oldest, prev = newest).
  std::vector<int32_t> prev_, next_;
  std::vector<bool> linked_;
  int32_t sentinel_;
  int num_evictable_ = 0;
};

// `lru_k` is used by kLruK only; its clock is the steady clock.
std::unique_ptr<EvictionPolicy> make_eviction_policy(EvictionPolicyKind kind, int num_blocks,
                                                     const LruKOptions& lru_k = {});
// Throws pagoda::Error when k or the period is out of range (the CLI's and the engine's check).
void validate(const LruKOptions& options);

}  // namespace pagoda
