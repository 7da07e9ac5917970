// BlockPool: reference counting, the free list and the prefix-cache hash map.
#include "pagoda/kv/block_pool.h"

#include <fmt/format.h>

#include "pagoda/core/check.h"

namespace pagoda {

BlockPool::BlockPool(int num_blocks, std::unique_ptr<EvictionPolicy> policy)
    : blocks_(num_blocks), policy_(std::move(policy)) {
  PAGODA_CHECK(num_blocks > 0 && policy_ != nullptr);
  free_list_.reserve(num_blocks);
  // Reversed so that a fresh pool hands out blocks 0, 1, 2, ...
  for (BlockId b = num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
}

std::optional<BlockHash> BlockPool::hash_of(BlockId block_id) const {
  const Block& block = blocks_[block_id];
  return block.cached ? std::optional<BlockHash>(block.hash) : std::nullopt;
}

std::optional<BlockId> BlockPool::lookup(const BlockHash& hash) const {
  const auto it = cached_.find(hash);
  return it == cached_.end() ? std::nullopt : std::optional<BlockId>(it->second);
}

void BlockPool::take_fresh(int num, std::vector<BlockId>& out, std::vector<EvictedBlock>* evicted) {
  PAGODA_CHECK(num >= 0 && num <= num_free_blocks(), "want {} blocks, {} free", num, num_free_blocks());
  for (int i = 0; i < num; ++i) {
    BlockId block_id;
    if (!free_list_.empty()) {
      block_id = free_list_.back();
      free_list_.pop_back();
    } else {
      AccessHistory history;
      block_id = policy_->evict_with_history(history);
      if (evicted) evicted->push_back({block_id, blocks_[block_id].hash, blocks_[block_id].info, history});
      uncache(block_id);
    }
    PAGODA_CHECK(blocks_[block_id].ref_count == 0);
    blocks_[block_id].ref_count = 1;
    out.push_back(block_id);
  }
}

void BlockPool::restore_history(BlockId block_id, const AccessHistory& history) {
  PAGODA_CHECK(block_id >= 0 && block_id < num_blocks() && blocks_[block_id].ref_count > 0 && !blocks_[block_id].cached,
               "block {} is not a fresh block", block_id);
  policy_->restore(block_id, history);
}

void BlockPool::add_ref(BlockId block_id) {
  Block& block = blocks_[block_id];
  if (block.ref_count == 0) {
    // Only cached blocks are reachable while unreferenced (through the hash map).
    PAGODA_CHECK(block.cached, "block {} is free", block_id);
    policy_->on_referenced(block_id);
  }
  ++block.ref_count;
  // A hit counts as an access whether or not other sequences already hold the block.
  if (block.cached) policy_->on_access(block_id, block.info);
}

void BlockPool::release(BlockId block_id) {
  Block& block = blocks_[block_id];
  PAGODA_CHECK(block.ref_count > 0, "double free of block {}", block_id);
  if (--block.ref_count > 0) return;
  if (block.cached) {
    policy_->on_evictable(block_id, block.info);
  } else {
    free_list_.push_back(block_id);
  }
}

bool BlockPool::publish(BlockId block_id, const BlockHash& hash, const CachedBlockInfo& info) {
  Block& block = blocks_[block_id];
  PAGODA_CHECK(block.ref_count > 0, "publishing unreferenced block {}", block_id);
  if (block.cached) return false;
  if (!cached_.emplace(hash, block_id).second) return false;
  block.cached = true;
  block.hash = hash;
  block.info = info;
  policy_->on_access(block_id, info);  // its first access
  return true;
}

int BlockPool::drop_evictable() {
  const std::vector<BlockId> dropped = policy_->evict_all();
  for (BlockId block_id : dropped) {
    uncache(block_id);
    free_list_.push_back(block_id);
  }
  return static_cast<int>(dropped.size());
}

void BlockPool::uncache(BlockId block_id) {
  Block& block = blocks_[block_id];
  PAGODA_CHECK(block.cached);
  cached_.erase(block.hash);
  block.cached = false;
}

std::string BlockPool::check_invariants(std::span<const int> expected_ref_counts) const {
  if (expected_ref_counts.size() != blocks_.size()) return "expected_ref_counts has the wrong size";
  std::vector<int> times_free(blocks_.size(), 0);
  for (BlockId b : free_list_) {
    if (b < 0 || b >= num_blocks()) return fmt::format("free list holds invalid block {}", b);
    if (++times_free[b] > 1) return fmt::format("block {} is on the free list twice", b);
  }
  int num_evictable = 0;
  for (BlockId b = 0; b < num_blocks(); ++b) {
    const Block& block = blocks_[b];
    if (block.ref_count != expected_ref_counts[b]) {
      return fmt::format("block {}: ref count {} but {} block tables hold it", b, block.ref_count,
                         expected_ref_counts[b]);
    }
    const bool is_free = times_free[b] > 0;
    const bool is_evictable = policy_->contains(b);
    num_evictable += is_evictable;
    if (block.ref_count > 0 && (is_free || is_evictable)) {
      return fmt::format("block {} is referenced but also free ({}) or evictable ({})", b, is_free, is_evictable);
    }
    if (block.ref_count == 0) {
      if (block.cached && (!is_evictable || is_free)) return fmt::format("cached block {} is not (only) evictable", b);
      if (!block.cached && (!is_free || is_evictable)) return fmt::format("uncached block {} is not (only) free", b);
    }
    if (block.cached) {
      const auto it = cached_.find(block.hash);
      if (it == cached_.end() || it->second != b) return fmt::format("cached block {} is missing from the hash map", b);
    }
  }
  if (num_evictable != policy_->num_evictable()) return "eviction policy counts blocks that are not evictable";
  for (const auto& [hash, b] : cached_) {
    if (b < 0 || b >= num_blocks() || !blocks_[b].cached || !(blocks_[b].hash == hash)) {
      return fmt::format("hash map entry for block {} does not match the block", b);
    }
  }
  return "";
}

}  // namespace pagoda
