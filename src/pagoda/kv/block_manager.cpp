// BlockManager: allocation, prefix matching and publishing over the BlockPool.
#include "pagoda/kv/block_manager.h"

#include <algorithm>
#include <fmt/format.h>

#include "pagoda/core/check.h"

namespace pagoda {

BlockManager::BlockManager(const BlockManagerOptions& options)
    : BlockManager(options, make_eviction_policy(options.eviction_policy, options.num_blocks, options.lru_k)) {}

BlockManager::BlockManager(const BlockManagerOptions& options, std::unique_ptr<EvictionPolicy> policy)
    : options_(options),
      pool_(options.num_blocks, std::move(policy)),
      host_(options.enable_prefix_caching ? options.num_host_blocks : 0, options.eviction_policy, options.lru_k),
      history_(options.prefetch),
      prefetched_(static_cast<size_t>(options.num_blocks), false) {
  PAGODA_CHECK(options.block_size > 0, "block_size {}", options.block_size);
}

int PrefixHit::num_host_blocks() const {
  return static_cast<int>(std::count(blocks.begin(), blocks.end(), kOnHost));
}

double BlockManager::usage() const {
  return static_cast<double>(num_blocks() - num_free_blocks()) / static_cast<double>(num_blocks());
}

PrefixHit BlockManager::match_prefix(std::span<const TokenId> tokens, std::string_view salt) const {
  PrefixHit hit;
  if (!options_.enable_prefix_caching) return hit;
  const int bs = block_size();
  const int num_full = static_cast<int>(tokens.size()) / bs;
  std::optional<BlockHash> parent;
  // The chain stops at the first miss: a block's hash depends on every block before it.
  for (int i = 0; i < num_full; ++i) {
    const BlockHash hash = hash_block(parent, tokens.subspan(static_cast<size_t>(i) * bs, bs), salt);
    if (const std::optional<BlockId> block_id = pool_.lookup(hash)) {
      hit.blocks.push_back(*block_id);
      hit.host_slots.push_back(-1);
    } else if (const std::optional<int> slot = host_.lookup(hash)) {
      hit.blocks.push_back(PrefixHit::kOnHost);
      hit.host_slots.push_back(*slot);
    } else {
      break;
    }
    hit.hashes.push_back(hash);
    parent = hash;
  }
  hit.num_tokens = static_cast<int>(hit.blocks.size()) * bs;
  return hit;
}

void BlockManager::record_prefix_lookup(int num_queried_tokens, int num_hit_tokens, int num_host_hit_tokens) {
  PAGODA_CHECK(num_hit_tokens >= 0 && num_hit_tokens <= num_queried_tokens);
  PAGODA_CHECK(num_host_hit_tokens >= 0 && num_host_hit_tokens <= num_hit_tokens);
  ++stats_.num_queries;
  stats_.num_queried_tokens += static_cast<uint64_t>(num_queried_tokens);
  stats_.num_hit_tokens += static_cast<uint64_t>(num_hit_tokens);
  stats_.num_host_hit_tokens += static_cast<uint64_t>(num_host_hit_tokens);
}

int BlockManager::num_new_blocks_needed(const SequenceBlocks& seq, int num_tokens, const PrefixHit& prefix) const {
  PAGODA_CHECK(prefix.blocks.empty() || seq.block_table_.empty(), "a prefix hit is only for a sequence with no blocks");
  PAGODA_CHECK(prefix.num_tokens <= num_tokens, "prefix of {} tokens for {} tokens", prefix.num_tokens, num_tokens);
  const int have = seq.num_blocks() + prefix.num_device_blocks();
  return std::max(0, num_blocks_for(num_tokens) - have);
}

bool BlockManager::can_allocate(const SequenceBlocks& seq, int num_tokens, const PrefixHit& prefix) const {
  const int num_new = num_new_blocks_needed(seq, num_tokens, prefix);
  // Evictable prefix blocks are counted as free now but stop being free once referenced.
  const auto num_evictable_hits = std::count_if(prefix.blocks.begin(), prefix.blocks.end(),
                                                [&](BlockId b) { return b != PrefixHit::kOnHost && pool_.is_evictable(b); });
  return num_new <= num_free_blocks() - static_cast<int>(num_evictable_hits);
}

bool BlockManager::allocate(SequenceBlocks& seq, int num_tokens, const PrefixHit& prefix) {
  if (!can_allocate(seq, num_tokens, prefix)) return false;
  const int num_new = num_new_blocks_needed(seq, num_tokens, prefix);
  // Device prefix blocks first: referencing them takes them out of the evictable set before any eviction.
  for (size_t i = 0; i < prefix.blocks.size(); ++i) {
    if (prefix.on_host(i)) {
      PAGODA_CHECK(host_.lookup(prefix.hashes[i]) == prefix.host_slots[i], "stale prefix hit: host slot {} changed",
                   prefix.host_slots[i]);
      continue;
    }
    const BlockId block_id = prefix.blocks[i];
    const std::optional<BlockHash> hash = pool_.hash_of(block_id);
    PAGODA_CHECK(hash && *hash == prefix.hashes[i], "stale prefix hit: block {} changed since match_prefix", block_id);
    pool_.add_ref(block_id);
    if (prefetched_[block_id]) {
      prefetched_[block_id] = false;
      ++prefetch_stats_.useful;
    }
  }
  std::vector<BlockId> fresh;
  fresh.reserve(static_cast<size_t>(num_new));
  take_fresh(num_new, fresh);
  // The block table in chain order: host blocks of the prefix take the first fresh blocks, each loaded
  // from its slot (which pins the slot) and published at once, since the step runs the load first.
  size_t next_fresh = 0;
  for (size_t i = 0; i < prefix.blocks.size(); ++i) {
    BlockId block_id = prefix.blocks[i];
    if (prefix.on_host(i)) {
      block_id = fresh[next_fresh++];
      load_from_host(prefix.host_slots[i], block_id, prefix.hashes[i],
                     CachedBlockInfo{static_cast<int>(i), seq.salt_key_, seq.weight_, seq.tenant_});
    }
    seq.block_table_.push_back(block_id);
    seq.block_hashes_.push_back(prefix.hashes[i]);
  }
  seq.block_table_.insert(seq.block_table_.end(), fresh.begin() + static_cast<std::ptrdiff_t>(next_fresh), fresh.end());
  // Offloads after the loads are recorded: no slot this allocation reads can be given to an evicted block.
  offload_evicted();
  return true;
}

void BlockManager::take_fresh(int num, std::vector<BlockId>& out) {
  evicted_.clear();
  pool_.take_fresh(num, out, &evicted_);
  for (const EvictedBlock& e : evicted_) {
    prefetched_[e.block] = false;
    if (e.info.tenant >= 0) ++tenant_counts(e.info.tenant).evicted;
  }
}

void BlockManager::load_from_host(int slot, BlockId block, const BlockHash& hash, const CachedBlockInfo& info) {
  host_.load(slot, block);
  pool_.restore_history(block, host_.history(slot));
  (void)pool_.publish(block, hash, info);  // a fresh block under a hash no device block holds (match_prefix's miss)
}

void BlockManager::offload_evicted() {
  for (const EvictedBlock& e : evicted_) host_.offload(e.block, e.hash, e.info, e.history);
  evicted_.clear();
}

TenantBlockCounts& BlockManager::tenant_counts(int tenant) {
  if (static_cast<size_t>(tenant) >= tenant_counts_.size()) tenant_counts_.resize(static_cast<size_t>(tenant) + 1);
  return tenant_counts_[static_cast<size_t>(tenant)];
}

std::vector<TenantBlockCounts> BlockManager::tenant_block_counts() const {
  std::vector<TenantBlockCounts> out = tenant_counts_;
  const std::vector<int> host = host_.slots_by_tenant();
  if (host.size() > out.size()) out.resize(host.size());
  for (size_t t = 0; t < host.size(); ++t) out[t].host_blocks = host[t];
  return out;
}

void BlockManager::record_access(std::span<const TokenId> tokens, std::string_view salt, const PrefixHit& hit,
                                 double now) {
  if (!host_.enabled() || !options_.prefetch.enabled()) return;
  const int bs = block_size();
  const size_t num_full = std::min(tokens.size() / bs, static_cast<size_t>(options_.prefetch.max_blocks));
  std::vector<BlockHash> chain(hit.hashes.begin(), hit.hashes.begin() + std::min(hit.hashes.size(), num_full));
  while (chain.size() < num_full) {
    const std::optional<BlockHash> parent = chain.empty() ? std::nullopt : std::optional<BlockHash>(chain.back());
    chain.push_back(hash_block(parent, tokens.subspan(chain.size() * bs, bs), salt));
  }
  history_.record(chain, now);
}

int BlockManager::prefetch(double now, int max_blocks) {
  if (!host_.enabled() || !options_.prefetch.enabled()) return 0;
  int issued = 0;
  for (const std::vector<BlockHash>& chain : history_.due(now)) {
    // Along the chain while blocks are on the device or the host: a prefix match stops at the first miss.
    for (size_t i = 0; i < chain.size() && issued < max_blocks; ++i) {
      if (pool_.lookup(chain[i])) continue;
      const std::optional<int> slot = host_.lookup(chain[i]);
      if (!slot || num_free_blocks() == 0) break;
      std::vector<BlockId> fresh;
      take_fresh(1, fresh);
      const BlockId block = fresh[0];
      const CachedBlockInfo info = host_.info(*slot);
      load_from_host(*slot, block, chain[i], info);
      pool_.release(block);  // cached and evictable, as if a finished request had left it
      offload_evicted();
      prefetched_[block] = true;
      if (info.tenant >= 0) ++tenant_counts(info.tenant).prefetched;
      ++issued;
    }
  }
  prefetch_stats_.issued += static_cast<uint64_t>(issued);
  return issued;
}

void BlockManager::publish_full_blocks(SequenceBlocks& seq, std::span<const TokenId> tokens, int num_computed_tokens) {
  if (!options_.enable_prefix_caching) return;
  PAGODA_CHECK(num_computed_tokens >= 0 && static_cast<size_t>(num_computed_tokens) <= tokens.size(),
               "{} computed tokens of {}", num_computed_tokens, tokens.size());
  const int bs = block_size();
  const int num_full = std::min(num_computed_tokens / bs, seq.num_blocks());
  for (int i = seq.num_hashed_blocks(); i < num_full; ++i) {
    const std::optional<BlockHash> parent =
        i == 0 ? std::nullopt : std::optional<BlockHash>(seq.block_hashes_[i - 1]);
    const BlockHash hash = hash_block(parent, tokens.subspan(static_cast<size_t>(i) * bs, bs), seq.salt_);
    seq.block_hashes_.push_back(hash);
    // A false result means an identical block is already cached; this copy stays private.
    (void)pool_.publish(seq.block_table_[i], hash, CachedBlockInfo{i, seq.salt_key_, seq.weight_, seq.tenant_});
  }
}

void BlockManager::free(SequenceBlocks& seq) {
  for (auto it = seq.block_table_.rbegin(); it != seq.block_table_.rend(); ++it) pool_.release(*it);
  seq.block_table_.clear();
  seq.block_hashes_.clear();
}

std::string BlockManager::check_invariants(std::span<const SequenceBlocks* const> seqs) const {
  std::vector<int> ref_counts(num_blocks(), 0);
  for (const SequenceBlocks* seq : seqs) {
    if (seq->num_hashed_blocks() > seq->num_blocks()) return "a sequence has more hashes than blocks";
    std::vector<BlockId> sorted(seq->block_table_);
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return "a block table holds a block twice";
    for (int i = 0; i < seq->num_blocks(); ++i) {
      const BlockId b = seq->block_table_[i];
      if (b < 0 || b >= num_blocks()) return fmt::format("block table holds invalid block {}", b);
      ++ref_counts[b];
      const std::optional<BlockHash> hash = pool_.hash_of(b);
      if (hash && (i >= seq->num_hashed_blocks() || !(*hash == seq->block_hashes_[i]))) {
        return fmt::format("cached block {} at table index {} disagrees with the sequence's hash chain", b, i);
      }
    }
  }
  if (std::string pool = pool_.check_invariants(ref_counts); !pool.empty()) return pool;
  return host_.check_invariants();
}

}  // namespace pagoda
