// SequenceBlocks: the KV blocks one sequence holds (its block table) and the chained hashes of its
// leading full, computed blocks. Owned by the sequence; only BlockManager changes it.
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pagoda/kv/block_hash.h"
#include "pagoda/kv/block_id.h"

namespace pagoda {

class SequenceBlocks {
 public:
  // `salt` scopes the sequence's prefix-cache entries (tenant / request cache_salt); `weight` is its
  // tenant's in eviction (CachedBlockInfo::weight).
  explicit SequenceBlocks(std::string salt = {}, float weight = 1.0f)
      : salt_(std::move(salt)), salt_key_(salt_key(salt_)), weight_(weight) {}

  // Block i holds token positions [i * block_size, (i + 1) * block_size).
  std::span<const BlockId> block_table() const { return block_table_; }
  int num_blocks() const { return static_cast<int>(block_table_.size()); }
  // Leading blocks whose hashes are known (full and computed, or prefix hits).
  int num_hashed_blocks() const { return static_cast<int>(block_hashes_.size()); }
  const std::string& salt() const { return salt_; }
  // The tenant index its cached blocks are counted under (CachedBlockInfo::tenant); -1: none.
  void set_tenant(int tenant) { tenant_ = tenant; }

 private:
  friend class BlockManager;

  std::string salt_;
  uint64_t salt_key_ = 0;
  float weight_ = 1.0f;
  int tenant_ = -1;
  std::vector<BlockId> block_table_;
  std::vector<BlockHash> block_hashes_;  // [num_hashed_blocks], a prefix of block_table_
};

}  // namespace pagoda
