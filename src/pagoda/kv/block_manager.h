// BlockManager: gives sequences KV blocks, shares computed full blocks between sequences through the
// prefix cache (chained block hashes), and takes blocks back. Metadata only: it never touches the KV
// tensors. Owned and used by the engine thread alone.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pagoda/core/types.h"
#include "pagoda/kv/block_pool.h"
#include "pagoda/kv/host_tier.h"
#include "pagoda/kv/prefix_history.h"
#include "pagoda/kv/sequence_blocks.h"

namespace pagoda {

struct BlockManagerOptions {
  int num_blocks = 0;
  int block_size = 16;
  bool enable_prefix_caching = true;
  EvictionPolicyKind eviction_policy = EvictionPolicyKind::kLru;
  LruKOptions lru_k{};  // K and the correlated-reference period, for kLruK
  int num_host_blocks = 0;  // > 0: a host tier of this many blocks (HostKvTier), with the same policy kind
  PrefetchOptions prefetch{};  // with a host tier: bring periodic prefixes back ahead of their requests
};

// Per tenant (CachedBlockInfo::tenant), in blocks: evicted from the device since start-up, brought back by
// prefetch since start-up, and held by the host tier now.
struct TenantBlockCounts {
  uint64_t evicted = 0;
  uint64_t prefetched = 0;
  int host_blocks = 0;
};

// Prefetches from the host tier, in blocks: brought back ahead of a request, and of those, hit by a
// request before the device evicted them again.
struct PrefetchStats {
  uint64_t issued = 0;
  uint64_t useful = 0;
};

// Cached blocks that already hold the first num_tokens tokens of a sequence: on the device, or (with a
// host tier) on the host, to be copied into fresh device blocks by the step that takes the hit.
struct PrefixHit {
  static constexpr BlockId kOnHost = -1;
  std::vector<BlockId> blocks;    // device blocks in chain order; kOnHost where the block is on the host
  std::vector<BlockHash> hashes;  // [blocks.size()], to check the hit is still valid when taken
  std::vector<int> host_slots;    // [blocks.size()]: the slot of each host block, -1 for device blocks
  int num_tokens = 0;             // blocks.size() * block_size

  bool on_host(size_t i) const { return blocks[i] == kOnHost; }
  int num_host_blocks() const;
  int num_device_blocks() const { return static_cast<int>(blocks.size()) - num_host_blocks(); }
};

// Prefix-cache counters, in tokens, as vLLM reports them (queries = hits + misses).
struct PrefixCacheStats {
  uint64_t num_queries = 0;  // recorded lookups (one per admitted sequence)
  uint64_t num_queried_tokens = 0;
  uint64_t num_hit_tokens = 0;
  uint64_t num_host_hit_tokens = 0;  // of num_hit_tokens, those copied back from the host tier
};

class BlockManager {
 public:
  explicit BlockManager(const BlockManagerOptions& options);
  // With a custom eviction policy (options.eviction_policy is then ignored).
  BlockManager(const BlockManagerOptions& options, std::unique_ptr<EvictionPolicy> policy);

  int block_size() const { return options_.block_size; }
  int num_blocks() const { return pool_.num_blocks(); }
  // Free plus evictable (cached, unreferenced) blocks: what allocations can use.
  int num_free_blocks() const { return pool_.num_free_blocks(); }
  int num_evictable_blocks() const { return pool_.num_evictable_blocks(); }
  // Fraction of blocks referenced by sequences (vLLM's kv_cache_usage_perc), in [0, 1].
  double usage() const;
  bool prefix_caching_enabled() const { return options_.enable_prefix_caching; }
  const PrefixCacheStats& prefix_cache_stats() const { return stats_; }
  const BlockPool& pool() const { return pool_; }
  const HostKvTier& host_tier() const { return host_; }
  const PrefetchStats& prefetch_stats() const { return prefetch_stats_; }
  // Indexed by tenant; tenants never counted may be missing at the end.
  std::vector<TenantBlockCounts> tenant_block_counts() const;

  int num_blocks_for(int num_tokens) const { return (num_tokens + block_size() - 1) / block_size(); }

  // The longest run of cached full blocks holding a prefix of `tokens` (whole blocks only), each found
  // on the device or else in the host tier. Pure: it changes no state and counts nothing; empty when
  // prefix caching is off. Callers that must compute at least one token pass tokens without the last one.
  PrefixHit match_prefix(std::span<const TokenId> tokens, std::string_view salt) const;
  // Adds one lookup to the prefix-cache counters (the scheduler calls it when it admits a sequence).
  void record_prefix_lookup(int num_queried_tokens, int num_hit_tokens, int num_host_hit_tokens = 0);

  // Fresh blocks that allocate(seq, num_tokens, prefix) would take (host blocks of the prefix included),
  // and whether they are available (evictable prefix blocks count against the free blocks, since taking
  // them makes them referenced).
  int num_new_blocks_needed(const SequenceBlocks& seq, int num_tokens, const PrefixHit& prefix = {}) const;
  [[nodiscard]] bool can_allocate(const SequenceBlocks& seq, int num_tokens, const PrefixHit& prefix = {}) const;

  // Makes `seq` hold blocks for its first `num_tokens` token positions: first the blocks of `prefix`
  // (a match_prefix result, only for a sequence holding no blocks yet; their reference counts go up),
  // then fresh blocks. The prefix's host blocks get fresh device blocks, published at once, and a copy
  // from the host each (take_transfers). Cached blocks evicted for fresh ones go to the host tier. All or
  // nothing: on false nothing changed.
  [[nodiscard]] bool allocate(SequenceBlocks& seq, int num_tokens, const PrefixHit& prefix = {});
  // A request of `tokens` (its prompt) with prefix hit `hit` (match_prefix of the same tokens and salt)
  // was admitted at `now` (seconds): its leading blocks' access history, for prefetch.
  void record_access(std::span<const TokenId> tokens, std::string_view salt, const PrefixHit& hit, double now);
  // Brings back from the host tier the blocks of every periodic prefix due at `now` (PrefixHistory), into
  // fresh device blocks left cached and evictable, at most `max_blocks` of them; returns how many.
  int prefetch(double now, int max_blocks);
  // The block copies recorded since the last call (host tier); the step planned now runs them first.
  KvTransfers take_transfers() { return host_.take_transfers(); }

  // Publishes to the prefix cache the blocks of `seq` that are full once its first `num_computed_tokens`
  // tokens are in the KV cache (the scheduler calls it when it plans the step that computes them).
  // `tokens` holds at least those tokens.
  void publish_full_blocks(SequenceBlocks& seq, std::span<const TokenId> tokens, int num_computed_tokens);

  // Drops the sequence's references, last block first so that its tail is evicted before its head.
  // Cached blocks become evictable; the sequence is left holding nothing.
  void free(SequenceBlocks& seq);

  // Forgets every evictable cached block and every unpinned host block; returns how many device blocks.
  // Blocks in use stay cached.
  int reset_prefix_cache() {
    host_.clear();
    history_.clear();
    std::fill(prefetched_.begin(), prefetched_.end(), false);
    return pool_.drop_evictable();
  }

  // Consistency check for tests: `seqs` must be every sequence holding blocks. Returns "" when every
  // block is exactly one of free / evictable / referenced, reference counts equal the number of block
  // tables holding the block, and hashes agree; otherwise the first violation.
  std::string check_invariants(std::span<const SequenceBlocks* const> seqs) const;

 private:
  BlockManagerOptions options_;
  BlockPool pool_;
  // Takes `num` fresh blocks into `out`; the cached blocks this evicts are returned for the host tier
  // (offload them once this allocation's loads are recorded).
  void take_fresh(int num, std::vector<BlockId>& out);
  void offload_evicted();
  // Host `slot`'s contents into fresh `block`: the copy recorded (the slot pinned), the access history they left
  // with restored, then the block published under `hash` (its access now).
  void load_from_host(int slot, BlockId block, const BlockHash& hash, const CachedBlockInfo& info);
  TenantBlockCounts& tenant_counts(int tenant);

  HostKvTier host_;
  PrefixHistory history_;
  std::vector<bool> prefetched_;  // [num_blocks]: brought back by prefetch and not hit or evicted since
  PrefixCacheStats stats_;
  PrefetchStats prefetch_stats_;
  std::vector<TenantBlockCounts> tenant_counts_;
  std::vector<EvictedBlock> evicted_;  // scratch of take_fresh()
};

}  // namespace pagoda
