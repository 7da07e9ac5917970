// BlockPool: per-block metadata of the paged KV cache (reference counts, prefix-cache hashes), the
// free list, the hash -> block map and the eviction policy. Every block is in exactly one state:
// free (unreferenced, uncached), evictable (unreferenced, cached) or referenced. Metadata only.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "pagoda/kv/block_hash.h"
#include "pagoda/kv/block_id.h"
#include "pagoda/kv/eviction_policy.h"

namespace pagoda {

// A cached block that take_fresh() evicted, as it was cached (the host tier keeps a copy of it).
struct EvictedBlock {
  BlockId block = 0;
  BlockHash hash;
  CachedBlockInfo info;
  AccessHistory history;  // the policy's, before it forgot it
};

class BlockPool {
 public:
  BlockPool(int num_blocks, std::unique_ptr<EvictionPolicy> policy);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  // Blocks a new allocation can take: free plus evictable.
  int num_free_blocks() const { return static_cast<int>(free_list_.size()) + policy_->num_evictable(); }
  int num_evictable_blocks() const { return policy_->num_evictable(); }
  int num_cached_blocks() const { return static_cast<int>(cached_.size()); }

  int ref_count(BlockId block_id) const { return blocks_[block_id].ref_count; }
  bool is_evictable(BlockId block_id) const { return policy_->contains(block_id); }
  std::optional<BlockHash> hash_of(BlockId block_id) const;
  std::optional<BlockId> lookup(const BlockHash& hash) const;

  // Appends `num` blocks with reference count 1 to `out`: free blocks first (they cost nothing), then
  // victims of the eviction policy, whose hashes leave the cache (and are appended to `evicted` when
  // given, before the block is handed out). Requires num <= num_free_blocks().
  void take_fresh(int num, std::vector<BlockId>& out, std::vector<EvictedBlock>* evicted = nullptr);
  // One more reference to a block (a prefix hit on a cached block); an evictable block stops being one.
  // On a cached block the policy sees an access (EvictionPolicy::on_access), also when already referenced.
  void add_ref(BlockId block_id);
  // One reference less; at zero a cached block becomes evictable and an uncached one free.
  void release(BlockId block_id);
  // Registers a computed, full, referenced block under `hash`. Returns false and changes nothing when the
  // block is already cached or another block holds the same hash (two sequences computed the same
  // block at once: the first one wins, the duplicate stays private and is freed normally). Publishing is
  // the block's first access for the policy.
  [[nodiscard]] bool publish(BlockId block_id, const BlockHash& hash, const CachedBlockInfo& info);
  // Before publishing a fresh block whose contents come back from the host tier: the access history they
  // left with (EvictionPolicy::restore).
  void restore_history(BlockId block_id, const AccessHistory& history);
  // Forgets every evictable cached block (they become free). Referenced cached blocks stay cached.
  // Returns how many were dropped.
  int drop_evictable();

  // Consistency check for tests: `expected_ref_counts[b]` is how many block tables hold block b.
  // Returns "" when consistent, otherwise a description of the first violation.
  std::string check_invariants(std::span<const int> expected_ref_counts) const;

 private:
  struct Block {
    int ref_count = 0;
    bool cached = false;  // has a hash and is in cached_
    BlockHash hash;
    CachedBlockInfo info;
  };

  void uncache(BlockId block_id);

  std::vector<Block> blocks_;
  std::vector<BlockId> free_list_;  // a stack; the most recently freed block is reused first
  std::unordered_map<BlockHash, BlockId, BlockHashHasher> cached_;
  std::unique_ptr<EvictionPolicy> policy_;
};

}  // namespace pagoda
