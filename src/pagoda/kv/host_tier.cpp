// HostKvTier: slots keyed by block hash, pins for this step's loads, the copies the next step runs.
#include "pagoda/kv/host_tier.h"

#include <fmt/format.h>

#include "pagoda/core/check.h"

namespace pagoda {

HostKvTier::HostKvTier(int num_slots, EvictionPolicyKind kind, const LruKOptions& lru_k) : slots_(num_slots) {
  PAGODA_CHECK(num_slots >= 0, "{} host slots", num_slots);
  policy_ = make_eviction_policy(kind, std::max(num_slots, 1), lru_k);
  free_slots_.reserve(num_slots);
  for (int s = num_slots - 1; s >= 0; --s) free_slots_.push_back(s);  // slot 0 first
}

std::optional<int> HostKvTier::lookup(const BlockHash& hash) const {
  const auto it = by_hash_.find(hash);
  return it == by_hash_.end() ? std::nullopt : std::optional<int>(it->second);
}

void HostKvTier::offload(BlockId block, const BlockHash& hash, const CachedBlockInfo& info, const AccessHistory& history) {
  if (!enabled()) return;
  if (const std::optional<int> slot = lookup(hash)) {
    ++stats_.offloads_skipped;
    touch(*slot);
    return;
  }
  int slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else if (policy_->num_evictable() > 0) {
    slot = policy_->evict();
    by_hash_.erase(slots_[slot].hash);
    count(slots_[slot].info, -1);
    ++stats_.evicted;
  } else {
    ++stats_.offloads_dropped;
    return;
  }
  Slot& s = slots_[slot];
  s.used = true;
  s.hash = hash;
  s.info = info;
  count(info, +1);
  by_hash_.emplace(hash, slot);
  if (history.count > 0) {
    policy_->restore(slot, history);
  } else {
    policy_->on_access(slot, info);
  }
  policy_->on_evictable(slot, info);
  pending_.to_host.push_back({block, slot});
  ++stats_.offloaded;
}

void HostKvTier::load(int slot, BlockId block) {
  PAGODA_CHECK(slot >= 0 && slot < num_slots() && slots_[slot].used, "loading empty host slot {}", slot);
  Slot& s = slots_[slot];
  if (s.pins++ == 0) policy_->on_referenced(slot);
  pinned_.push_back(slot);
  policy_->on_access(slot, s.info);
  pending_.to_device.push_back({block, slot});
  ++stats_.loaded;
}

void HostKvTier::count(const CachedBlockInfo& info, int delta) {
  if (info.tenant < 0) return;
  if (static_cast<size_t>(info.tenant) >= by_tenant_.size()) by_tenant_.resize(static_cast<size_t>(info.tenant) + 1, 0);
  by_tenant_[static_cast<size_t>(info.tenant)] += delta;
}

void HostKvTier::touch(int slot) {
  // A policy sees accesses only on slots outside its evictable set (as the device pool's blocks).
  Slot& s = slots_[slot];
  if (s.pins == 0) policy_->on_referenced(slot);
  policy_->on_access(slot, s.info);
  if (s.pins == 0) policy_->on_evictable(slot, s.info);
}

void HostKvTier::unpin(int slot) {
  Slot& s = slots_[slot];
  PAGODA_CHECK(s.pins > 0, "host slot {} is not pinned", slot);
  if (--s.pins == 0) policy_->on_evictable(slot, s.info);
}

KvTransfers HostKvTier::take_transfers() {
  for (int slot : pinned_) unpin(slot);
  pinned_.clear();
  KvTransfers out;
  std::swap(out, pending_);
  return out;
}

int HostKvTier::clear() {
  const std::vector<BlockId> dropped = policy_->evict_all();
  for (int slot : dropped) {
    by_hash_.erase(slots_[slot].hash);
    count(slots_[slot].info, -1);
    slots_[slot].used = false;
    free_slots_.push_back(slot);
  }
  return static_cast<int>(dropped.size());
}

std::string HostKvTier::check_invariants() const {
  int used = 0;
  std::vector<int> times_free(slots_.size(), 0);
  for (int s : free_slots_) {
    if (s < 0 || s >= num_slots()) return fmt::format("free list holds invalid slot {}", s);
    if (++times_free[s] > 1) return fmt::format("slot {} is free twice", s);
  }
  int evictable = 0;
  for (int s = 0; s < num_slots(); ++s) {
    const Slot& slot = slots_[s];
    if (slot.used == (times_free[s] > 0)) return fmt::format("slot {}: used {} but on the free list {}", s, slot.used, times_free[s]);
    if (!slot.used) {
      if (slot.pins != 0 || policy_->contains(s)) return fmt::format("free slot {} is pinned or evictable", s);
      continue;
    }
    ++used;
    const auto it = by_hash_.find(slot.hash);
    if (it == by_hash_.end() || it->second != s) return fmt::format("slot {} is missing from the hash map", s);
    if ((slot.pins == 0) != policy_->contains(s)) return fmt::format("slot {}: {} pins, evictable {}", s, slot.pins, policy_->contains(s));
    evictable += slot.pins == 0;
  }
  if (used != num_used()) return fmt::format("{} used slots, {} hashes", used, num_used());
  if (evictable != policy_->num_evictable()) return "the policy counts slots that are not evictable";
  return "";
}

}  // namespace pagoda
