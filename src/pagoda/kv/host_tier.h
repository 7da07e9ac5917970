// HostKvTier: the metadata of the host-memory KV tier (--kv-offload-memory). A cached block that the
// device pool evicts is copied into a host slot instead of being dropped; a later prefix match that
// finds it there gets a fresh device block and a copy back, so it is a hit, not a recompute. The tier
// is content-addressed like the device cache (slots are keyed by the chained block hash, which names
// the block's tokens and salt), so a slot can never serve stale data: the same hash is the same KV.
//
// Copies are not run here: each one is recorded, and the step the scheduler plans next takes them
// (KvTransfers) and runs them before its forward, all offloads first, then all loads, in stream order
// after the step before it. That order makes the step's own reuse safe: a device block offloaded and
// handed out again in the same step is read before it is written, and a slot that a load of this step
// reads is pinned until the step takes its transfers, so no offload of the same step overwrites it.
// Which unpinned slot gives way when the tier is full is an EvictionPolicy over slot ids (the device
// pool's kind: LRU or LRU-K with tenant weights). Metadata only; the engine thread alone uses it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "pagoda/kv/block_hash.h"
#include "pagoda/kv/block_id.h"
#include "pagoda/kv/eviction_policy.h"

namespace pagoda {

// One block copy between a device block and a host slot.
struct KvBlockCopy {
  BlockId block = 0;
  int slot = 0;
  friend bool operator==(const KvBlockCopy&, const KvBlockCopy&) = default;
};

// The copies one step runs before its forward: every `to_host` copy, then every `to_device` copy.
struct KvTransfers {
  std::vector<KvBlockCopy> to_host;    // device block -> host slot (offloads of evicted blocks)
  std::vector<KvBlockCopy> to_device;  // host slot -> device block (host hits, prefetches)
  bool empty() const { return to_host.empty() && to_device.empty(); }
};

// Counters since start-up, in blocks.
struct HostTierStats {
  uint64_t offloaded = 0;          // device -> host copies
  uint64_t offloads_skipped = 0;   // evicted blocks already on the host (no copy) ...
  uint64_t offloads_dropped = 0;   // ... or dropped because every slot was pinned
  uint64_t loaded = 0;             // host -> device copies
  uint64_t evicted = 0;            // host slots given up for newer blocks
};

class HostKvTier {
 public:
  // `num_slots` >= 0; with 0 the tier holds nothing and every call is a no-op. Slots are chosen by a
  // policy of `kind` (its LRU-K options for kLruK).
  HostKvTier(int num_slots, EvictionPolicyKind kind, const LruKOptions& lru_k = {});

  int num_slots() const { return static_cast<int>(slots_.size()); }
  int num_used() const { return static_cast<int>(by_hash_.size()); }
  bool enabled() const { return !slots_.empty(); }
  const HostTierStats& stats() const { return stats_; }

  // What the device knew of the block in a used slot (its chain position, salt key, tenant weight).
  const CachedBlockInfo& info(int slot) const { return slots_[slot].info; }
  // The slot holding `hash`, if any. Pure.
  std::optional<int> lookup(const BlockHash& hash) const;
  // The device evicted cached `block` (its hash, info and access history): keep a copy. Already on the host:
  // counts as an access, no copy. Otherwise takes a free slot, or evicts an unpinned one, and records the copy;
  // when every slot is pinned the block is dropped. The slot takes the block's history (with none, the
  // offload is its first access).
  void offload(BlockId block, const BlockHash& hash, const CachedBlockInfo& info, const AccessHistory& history = {});
  // The access history of a used slot, for the device block its contents go back to (BlockPool::restore_history).
  AccessHistory history(int slot) const { return policy_->history(slot); }
  // Records the copy of `slot` (holding a block) into fresh device `block`, and pins the slot until
  // take_transfers(). Counts as an access.
  void load(int slot, BlockId block);
  // The copies recorded since the last call, in recording order; unpins every slot.
  KvTransfers take_transfers();
  // Forgets every unpinned slot (a prefix-cache reset); returns how many.
  int clear();

  // Used slots per CachedBlockInfo::tenant (index: tenant; tenants holding none may be missing at the end).
  std::vector<int> slots_by_tenant() const { return by_tenant_; }

  // Consistency check for tests: "" when the hash map, the slots, the pins and the policy agree.
  std::string check_invariants() const;

 private:
  struct Slot {
    bool used = false;
    int pins = 0;  // loads recorded this step
    BlockHash hash;
    CachedBlockInfo info;
  };

  void touch(int slot);  // an access to a used slot
  void count(const CachedBlockInfo& info, int delta);
  void unpin(int slot);

  std::vector<Slot> slots_;
  std::vector<int> free_slots_;  // a stack
  std::unordered_map<BlockHash, int, BlockHashHasher> by_hash_;
  std::unique_ptr<EvictionPolicy> policy_;  // over slot ids: the used, unpinned slots
  std::vector<int> pinned_;                 // slots pinned since the last take_transfers (with repeats)
  KvTransfers pending_;
  HostTierStats stats_;
  std::vector<int> by_tenant_;
};

}  // namespace pagoda
