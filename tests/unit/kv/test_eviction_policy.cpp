// LRU eviction: least recently made evictable goes first; re-referenced blocks leave the set.
#include "pagoda/kv/eviction_policy.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

TEST(LruEvictionPolicy, EvictsOldestFirst) {
  LruEvictionPolicy lru(8);
  for (BlockId b : {5, 2, 7, 0}) lru.on_evictable(b, {});
  EXPECT_EQ(lru.num_evictable(), 4);
  EXPECT_EQ(lru.evict(), 5);
  EXPECT_EQ(lru.evict(), 2);
  lru.on_evictable(5, {});
  EXPECT_EQ(lru.evict(), 7);
  EXPECT_EQ(lru.evict(), 0);
  EXPECT_EQ(lru.evict(), 5);
  EXPECT_EQ(lru.num_evictable(), 0);
}

TEST(LruEvictionPolicy, ReferencedBlocksLeaveTheSet) {
  LruEvictionPolicy lru(4);
  for (BlockId b : {0, 1, 2, 3}) lru.on_evictable(b, {});
  lru.on_referenced(0);
  lru.on_referenced(2);
  EXPECT_FALSE(lru.contains(0));
  EXPECT_TRUE(lru.contains(1));
  EXPECT_EQ(lru.num_evictable(), 2);
  lru.on_evictable(0, {});  // freed again: now the most recent
  EXPECT_EQ(lru.evict_all(), (std::vector<BlockId>{1, 3, 0}));
}

}  // namespace
}  // namespace pagoda
