// LRU-K eviction with tenant weights: access histories per block, one ordered set per weight.
#include "pagoda/kv/lru_k_policy.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "pagoda/core/check.h"

namespace pagoda {
namespace {

// Whether a (weight wa, key time ta) goes before b at `now` when both are finite or both infinite: the
// larger weighted age first, then the lower weight, then the lower id.
bool goes_before(double now, double ta, float wa, BlockId ia, double tb, float wb, BlockId ib) {
  const double age_a = (now - ta) / static_cast<double>(wa);
  const double age_b = (now - tb) / static_cast<double>(wb);
  if (age_a != age_b) return age_a > age_b;
  if (wa != wb) return wa < wb;
  return ia < ib;
}

}  // namespace

double LruKEvictionPolicy::steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

LruKEvictionPolicy::LruKEvictionPolicy(int num_blocks, const LruKOptions& options, Clock clock)
    : options_(options),
      clock_(std::move(clock)),
      blocks_(num_blocks),
      entries_(static_cast<size_t>(num_blocks) * options.k) {
  PAGODA_CHECK(num_blocks > 0 && clock_ != nullptr);
  PAGODA_CHECK(options.k >= 1 && options.k <= LruKOptions::kMaxK, "k {}", options.k);
  PAGODA_CHECK(options.correlated_period_seconds >= 0, "correlated period {}", options.correlated_period_seconds);
}

void LruKEvictionPolicy::record_access(BlockId block_id, double now) {
  BlockState& s = blocks_[block_id];
  double* e = &entries_[static_cast<size_t>(block_id) * options_.k];
  if (s.num_entries > 0 && now - s.entry_start < options_.correlated_period_seconds) {
    e[0] = now;  // correlated: the latest entry moves to this access
    return;
  }
  // A new entry: shift the older ones down, dropping the K-th.
  const int kept = std::min(s.num_entries, options_.k - 1);
  for (int i = kept; i > 0; --i) e[i] = e[i - 1];
  e[0] = now;
  s.num_entries = kept + 1;
  s.entry_start = now;
}

void LruKEvictionPolicy::on_access(BlockId block_id, const CachedBlockInfo&) {
  PAGODA_CHECK(block_id >= 0 && block_id < static_cast<BlockId>(blocks_.size()), "block {}", block_id);
  const double now = clock_();
  // The pool takes a block out of the evictable set before a hit; keep a stray call exact all the same.
  const bool was_evictable = blocks_[block_id].evictable;
  if (was_evictable) erase(block_id);
  record_access(block_id, now);
  if (was_evictable) insert(block_id);
}

void LruKEvictionPolicy::on_evictable(BlockId block_id, const CachedBlockInfo& info) {
  PAGODA_CHECK(block_id >= 0 && block_id < static_cast<BlockId>(blocks_.size()) && !blocks_[block_id].evictable,
               "block {}", block_id);
  PAGODA_CHECK(info.weight > 0 && std::isfinite(info.weight), "block {}: weight {}", block_id, info.weight);
  BlockState& s = blocks_[block_id];
  if (s.num_entries == 0) record_access(block_id, clock_());
  s.weight = info.weight;
  insert(block_id);
}

void LruKEvictionPolicy::on_referenced(BlockId block_id) {
  PAGODA_CHECK(contains(block_id), "block {} is not evictable", block_id);
  erase(block_id);
}

BlockId LruKEvictionPolicy::evict() {
  PAGODA_CHECK(num_evictable_ > 0);
  const BlockId victim = pick(clock_());
  remove_victim(victim);
  return victim;
}

BlockId LruKEvictionPolicy::evict_with_history(AccessHistory& out) {
  PAGODA_CHECK(num_evictable_ > 0);
  const BlockId victim = pick(clock_());
  out = history(victim);
  remove_victim(victim);
  return victim;
}

AccessHistory LruKEvictionPolicy::history(BlockId block_id) const {
  PAGODA_CHECK(block_id >= 0 && block_id < static_cast<BlockId>(blocks_.size()), "block {}", block_id);
  AccessHistory h;
  h.count = blocks_[block_id].num_entries;
  const double* e = &entries_[static_cast<size_t>(block_id) * options_.k];
  for (int i = 0; i < h.count; ++i) h.times[static_cast<size_t>(i)] = e[i];
  return h;
}

void LruKEvictionPolicy::restore(BlockId block_id, const AccessHistory& h) {
  PAGODA_CHECK(block_id >= 0 && block_id < static_cast<BlockId>(blocks_.size()) && !blocks_[block_id].evictable &&
                   blocks_[block_id].num_entries == 0,
               "block {}: restoring a history over a live one", block_id);
  PAGODA_CHECK(h.count >= 0 && h.count <= kMaxAccessHistory, "a history of {} entries", h.count);
  BlockState& s = blocks_[block_id];
  double* e = &entries_[static_cast<size_t>(block_id) * options_.k];
  s.num_entries = std::min(h.count, options_.k);
  for (int i = 0; i < s.num_entries; ++i) {
    PAGODA_CHECK(i == 0 || h.times[static_cast<size_t>(i)] <= h.times[static_cast<size_t>(i - 1)], "history out of order");
    e[i] = h.times[static_cast<size_t>(i)];
  }
  // The latest entry's first access is not kept: its time stands in (a later access within the correlated
  // period of it merges into it).
  if (s.num_entries > 0) s.entry_start = e[0];
}

std::vector<BlockId> LruKEvictionPolicy::evict_all() {
  const double now = clock_();
  std::vector<BlockId> out;
  out.reserve(num_evictable_);
  while (num_evictable_ > 0) {
    out.push_back(pick(now));
    remove_victim(out.back());
  }
  return out;
}

bool LruKEvictionPolicy::contains(BlockId block_id) const {
  return block_id >= 0 && block_id < static_cast<BlockId>(blocks_.size()) && blocks_[block_id].evictable;
}

LruKEvictionPolicy::Key LruKEvictionPolicy::key_of(BlockId block_id) const {
  const BlockState& s = blocks_[block_id];
  const double* e = &entries_[static_cast<size_t>(block_id) * options_.k];
  const bool finite = s.num_entries >= options_.k;
  return Key{finite, finite ? e[options_.k - 1] : e[0], block_id};
}

void LruKEvictionPolicy::insert(BlockId block_id) {
  BlockState& s = blocks_[block_id];
  by_weight_[s.weight].insert(key_of(block_id));
  s.evictable = true;
  ++num_evictable_;
}

void LruKEvictionPolicy::erase(BlockId block_id) {
  BlockState& s = blocks_[block_id];
  const auto it = by_weight_.find(s.weight);
  PAGODA_CHECK(it != by_weight_.end() && it->second.erase(key_of(block_id)) == 1, "block {}", block_id);
  if (it->second.empty()) by_weight_.erase(it);
  s.evictable = false;
  --num_evictable_;
}

BlockId LruKEvictionPolicy::pick(double now) const {
  // Each set's head is its weight's victim; the heads are compared at `now`.
  const Key* best = nullptr;
  float best_weight = 0;
  for (const auto& [weight, keys] : by_weight_) {
    const Key& head = *keys.begin();
    const bool better =
        best == nullptr ||
        (head.finite != best->finite
             ? !head.finite
             : goes_before(now, head.time, weight, head.block_id, best->time, best_weight, best->block_id));
    if (better) {
      best = &head;
      best_weight = weight;
    }
  }
  PAGODA_CHECK(best != nullptr);
  return best->block_id;
}

void LruKEvictionPolicy::remove_victim(BlockId block_id) {
  erase(block_id);
  blocks_[block_id].num_entries = 0;  // evicted: its contents, and so its history, are gone
}

}  // namespace pagoda
