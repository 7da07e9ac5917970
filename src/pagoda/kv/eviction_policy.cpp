// LRU eviction over an intrusive doubly linked list of block ids; the policy factory.
#include "pagoda/kv/eviction_policy.h"

#include <cmath>
#include <fmt/format.h>

#include "pagoda/core/check.h"
#include "pagoda/core/error.h"
#include "pagoda/kv/lru_k_policy.h"

namespace pagoda {

LruEvictionPolicy::LruEvictionPolicy(int num_blocks)
    : prev_(num_blocks + 1), next_(num_blocks + 1), linked_(num_blocks, false), sentinel_(num_blocks) {
  prev_[sentinel_] = next_[sentinel_] = sentinel_;
}

void LruEvictionPolicy::on_evictable(BlockId block_id, const CachedBlockInfo&) {
  PAGODA_CHECK(block_id >= 0 && block_id < sentinel_ && !linked_[block_id], "block {}", block_id);
  // Append at the newest end.
  const int32_t newest = prev_[sentinel_];
  prev_[block_id] = newest;
  next_[block_id] = sentinel_;
  next_[newest] = block_id;
  prev_[sentinel_] = block_id;
  linked_[block_id] = true;
  ++num_evictable_;
}

void LruEvictionPolicy::on_referenced(BlockId block_id) { unlink(block_id); }

BlockId LruEvictionPolicy::evict() {
  PAGODA_CHECK(num_evictable_ > 0);
  const BlockId oldest = next_[sentinel_];
  unlink(oldest);
  return oldest;
}

std::vector<BlockId> LruEvictionPolicy::evict_all() {
  std::vector<BlockId> out;
  out.reserve(num_evictable_);
  while (num_evictable_ > 0) out.push_back(evict());
  return out;
}

bool LruEvictionPolicy::contains(BlockId block_id) const {
  return block_id >= 0 && block_id < sentinel_ && linked_[block_id];
}

void LruEvictionPolicy::unlink(BlockId block_id) {
  PAGODA_CHECK(contains(block_id), "block {} is not evictable", block_id);
  next_[prev_[block_id]] = next_[block_id];
  prev_[next_[block_id]] = prev_[block_id];
  linked_[block_id] = false;
  --num_evictable_;
}

std::unique_ptr<EvictionPolicy> make_eviction_policy(EvictionPolicyKind kind, int num_blocks,
                                                     const LruKOptions& lru_k) {
  switch (kind) {
    case EvictionPolicyKind::kLru:
      return std::make_unique<LruEvictionPolicy>(num_blocks);
    case EvictionPolicyKind::kLruK:
      validate(lru_k);
      return std::make_unique<LruKEvictionPolicy>(num_blocks, lru_k);
  }
  PAGODA_CHECK(false, "unknown eviction policy");
  return nullptr;
}

void validate(const LruKOptions& options) {
  if (options.k < 1 || options.k > LruKOptions::kMaxK)
    throw Error(fmt::format("LRU-K: K must be in [1, {}], got {}", LruKOptions::kMaxK, options.k));
  if (!(options.correlated_period_seconds >= 0) || !std::isfinite(options.correlated_period_seconds))
    throw Error(fmt::format("LRU-K: the correlated-reference period must be >= 0 seconds, got {}",
                            options.correlated_period_seconds));
}

}  // namespace pagoda
