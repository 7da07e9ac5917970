// BlockManager: all-or-nothing allocation, prefix sharing of full blocks, salts, LRU eviction of
// cached blocks, and the disabled-cache switch. check_invariants() runs after every mutation.
#include "pagoda/kv/block_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

namespace pagoda {
namespace {

std::vector<TokenId> iota_tokens(int n, TokenId first = 0) {
  std::vector<TokenId> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::span<const TokenId> all_but_last(const std::vector<TokenId>& t) { return std::span(t).first(t.size() - 1); }

class BlockManagerTest : public ::testing::Test {
 protected:
  void make(int num_blocks, int block_size, bool prefix_caching = true) {
    bm_ = std::make_unique<BlockManager>(BlockManagerOptions{num_blocks, block_size, prefix_caching});
  }
  void expect_consistent(std::initializer_list<const SequenceBlocks*> seqs) {
    std::vector<const SequenceBlocks*> v(seqs);
    EXPECT_EQ(bm_->check_invariants(v), "");
  }
  std::unique_ptr<BlockManager> bm_;
};

TEST_F(BlockManagerTest, AllocatesWholeBlocksAndFreesThem) {
  make(8, 4);
  SequenceBlocks a;
  ASSERT_TRUE(bm_->allocate(a, 5));
  EXPECT_EQ(a.num_blocks(), 2);
  ASSERT_TRUE(bm_->allocate(a, 8));  // still fits in two blocks
  EXPECT_EQ(a.num_blocks(), 2);
  ASSERT_TRUE(bm_->allocate(a, 9));
  EXPECT_EQ(a.num_blocks(), 3);
  EXPECT_EQ(bm_->num_free_blocks(), 5);
  EXPECT_DOUBLE_EQ(bm_->usage(), 3.0 / 8.0);
  expect_consistent({&a});
  bm_->free(a);
  EXPECT_EQ(a.num_blocks(), 0);
  EXPECT_EQ(bm_->num_free_blocks(), 8);
  EXPECT_DOUBLE_EQ(bm_->usage(), 0.0);
  expect_consistent({&a});
}

TEST_F(BlockManagerTest, FailedAllocationChangesNothing) {
  make(4, 4);
  SequenceBlocks a, b;
  ASSERT_TRUE(bm_->allocate(a, 12));
  ASSERT_TRUE(bm_->allocate(b, 2));
  EXPECT_FALSE(bm_->allocate(b, 9));  // needs 2 more, 1 free
  EXPECT_EQ(b.num_blocks(), 1);
  EXPECT_EQ(bm_->num_free_blocks(), 0);
  SequenceBlocks c;
  EXPECT_FALSE(bm_->allocate(c, 1));
  EXPECT_EQ(c.num_blocks(), 0);
  expect_consistent({&a, &b, &c});
}

TEST_F(BlockManagerTest, SharesOnlyFullComputedBlocks) {
  make(16, 4);
  const std::vector<TokenId> prompt_a = iota_tokens(10);  // blocks [0..3] [4..7] and a partial [8, 9]
  SequenceBlocks a;
  EXPECT_EQ(bm_->match_prefix(all_but_last(prompt_a), "").num_tokens, 0);
  ASSERT_TRUE(bm_->allocate(a, 10));
  bm_->publish_full_blocks(a, prompt_a, 6);  // only the first block is computed and full
  EXPECT_EQ(bm_->pool().num_cached_blocks(), 1);
  bm_->publish_full_blocks(a, prompt_a, 10);
  EXPECT_EQ(bm_->pool().num_cached_blocks(), 2);
  EXPECT_EQ(a.num_hashed_blocks(), 2);

  // B shares A's first 9 tokens: only the two full blocks are shared.
  std::vector<TokenId> prompt_b = iota_tokens(9);
  prompt_b.push_back(100);
  prompt_b.push_back(101);
  const PrefixHit hit = bm_->match_prefix(all_but_last(prompt_b), "");
  EXPECT_EQ(hit.num_tokens, 8);
  ASSERT_EQ(hit.blocks.size(), 2u);
  EXPECT_EQ(hit.blocks[0], a.block_table()[0]);
  EXPECT_EQ(hit.blocks[1], a.block_table()[1]);
  SequenceBlocks b;
  ASSERT_TRUE(bm_->allocate(b, 11, hit));
  EXPECT_EQ(b.num_blocks(), 3);
  EXPECT_EQ(b.num_hashed_blocks(), 2);
  EXPECT_NE(b.block_table()[2], a.block_table()[2]);
  EXPECT_EQ(bm_->pool().ref_count(a.block_table()[0]), 2);
  EXPECT_EQ(bm_->pool().ref_count(a.block_table()[2]), 1);
  expect_consistent({&a, &b});

  bm_->free(a);
  expect_consistent({&a, &b});
  bm_->free(b);
  expect_consistent({&a, &b});
  EXPECT_EQ(bm_->num_evictable_blocks(), 2);
  EXPECT_EQ(bm_->num_free_blocks(), 16);
}

TEST_F(BlockManagerTest, MatchStopsAtFirstMissAndNeverTakesAPartialBlock) {
  make(16, 4);
  const std::vector<TokenId> prompt = iota_tokens(12);
  SequenceBlocks a;
  ASSERT_TRUE(bm_->allocate(a, 12));
  bm_->publish_full_blocks(a, prompt, 12);
  std::vector<TokenId> changed = prompt;
  changed[5] = 999;  // second block differs, so the third cannot match either
  EXPECT_EQ(bm_->match_prefix(changed, "").num_tokens, 4);
  EXPECT_EQ(bm_->match_prefix(std::span(prompt).first(11), "").num_tokens, 8);
  EXPECT_EQ(bm_->match_prefix(prompt, "").num_tokens, 12);
  EXPECT_EQ(bm_->match_prefix(std::span(prompt).first(3), "").num_tokens, 0);
}

TEST_F(BlockManagerTest, DifferentSaltsNeverShare) {
  make(16, 4);
  const std::vector<TokenId> prompt = iota_tokens(9);
  SequenceBlocks a("tenant-a");
  ASSERT_TRUE(bm_->allocate(a, 9));
  bm_->publish_full_blocks(a, prompt, 9);
  EXPECT_EQ(bm_->match_prefix(all_but_last(prompt), "tenant-a").num_tokens, 8);
  EXPECT_EQ(bm_->match_prefix(all_but_last(prompt), "tenant-b").num_tokens, 0);
  EXPECT_EQ(bm_->match_prefix(all_but_last(prompt), "").num_tokens, 0);

  // The same tokens under another salt are computed and cached separately.
  SequenceBlocks b("tenant-b");
  ASSERT_TRUE(bm_->allocate(b, 9));
  bm_->publish_full_blocks(b, prompt, 9);
  EXPECT_EQ(bm_->pool().num_cached_blocks(), 4);
  expect_consistent({&a, &b});
}

TEST_F(BlockManagerTest, FreedCachedBlocksAreEvictedLeastRecentlyFreedFirst) {
  make(4, 2);
  const std::vector<TokenId> pa = {1, 2, 3, 4};
  const std::vector<TokenId> pb = {5, 6, 7, 8};
  SequenceBlocks a, b;
  ASSERT_TRUE(bm_->allocate(a, 4));
  ASSERT_TRUE(bm_->allocate(b, 4));
  bm_->publish_full_blocks(a, pa, 4);
  bm_->publish_full_blocks(b, pb, 4);
  const std::vector<BlockId> blocks_a(a.block_table().begin(), a.block_table().end());
  bm_->free(a);  // A's tail then head become evictable, then B's
  bm_->free(b);
  EXPECT_EQ(bm_->num_evictable_blocks(), 4);
  expect_consistent({&a, &b});

  // One fresh block evicts A's tail: A's head still matches, B intact.
  SequenceBlocks c;
  ASSERT_TRUE(bm_->allocate(c, 1));
  EXPECT_EQ(c.block_table()[0], blocks_a[1]);
  EXPECT_EQ(bm_->match_prefix(pa, "").num_tokens, 2);
  EXPECT_EQ(bm_->match_prefix(pb, "").num_tokens, 4);

  // A prefix hit on B takes B's blocks out of the evictable set; the next eviction is A's head.
  SequenceBlocks d;
  const PrefixHit hit = bm_->match_prefix(pb, "");
  ASSERT_TRUE(bm_->allocate(d, 4, hit));
  EXPECT_EQ(bm_->num_evictable_blocks(), 1);
  SequenceBlocks e;
  ASSERT_TRUE(bm_->allocate(e, 1));
  EXPECT_EQ(e.block_table()[0], blocks_a[0]);
  EXPECT_EQ(bm_->match_prefix(pa, "").num_tokens, 0);
  EXPECT_EQ(bm_->num_free_blocks(), 0);
  expect_consistent({&a, &b, &c, &d, &e});
}

TEST_F(BlockManagerTest, UncachedFreeBlocksAreUsedBeforeEvicting) {
  make(4, 2);
  const std::vector<TokenId> pa = {1, 2, 3, 4};
  SequenceBlocks a;
  ASSERT_TRUE(bm_->allocate(a, 4));
  bm_->publish_full_blocks(a, pa, 4);
  bm_->free(a);
  SequenceBlocks b;
  ASSERT_TRUE(bm_->allocate(b, 4));  // the two never-cached blocks
  EXPECT_EQ(bm_->match_prefix(pa, "").num_tokens, 4);
  expect_consistent({&a, &b});
}

TEST_F(BlockManagerTest, EvictablePrefixBlocksDoNotCountAsFreeForTheSameAllocation) {
  make(3, 2);
  const std::vector<TokenId> p = {1, 2, 3, 4, 5, 6};
  SequenceBlocks a;
  ASSERT_TRUE(bm_->allocate(a, 6));
  bm_->publish_full_blocks(a, p, 6);
  bm_->free(a);
  EXPECT_EQ(bm_->num_free_blocks(), 3);

  const PrefixHit hit = bm_->match_prefix(std::span(p).first(5), "");
  ASSERT_EQ(hit.num_tokens, 4);
  SequenceBlocks b;
  EXPECT_EQ(bm_->num_new_blocks_needed(b, 8, hit), 2);
  EXPECT_FALSE(bm_->allocate(b, 8, hit));  // 2 new blocks, but only 1 block is free once the hit is taken
  EXPECT_EQ(b.num_blocks(), 0);
  EXPECT_EQ(bm_->num_evictable_blocks(), 3);
  ASSERT_TRUE(bm_->allocate(b, 6, hit));  // 1 new block: evicts A's last block
  EXPECT_EQ(bm_->num_free_blocks(), 0);
  expect_consistent({&a, &b});
}

TEST_F(BlockManagerTest, DuplicateComputedBlockStaysPrivate) {
  make(8, 2);
  const std::vector<TokenId> p = {1, 2, 3};
  SequenceBlocks a, b;
  ASSERT_TRUE(bm_->allocate(a, 3));
  ASSERT_TRUE(bm_->allocate(b, 3));  // admitted in the same step, before A's blocks were published
  bm_->publish_full_blocks(a, p, 3);
  bm_->publish_full_blocks(b, p, 3);
  EXPECT_EQ(bm_->pool().num_cached_blocks(), 1);
  EXPECT_EQ(b.num_hashed_blocks(), 1);  // B still knows its hash chain
  expect_consistent({&a, &b});
  bm_->free(a);
  bm_->free(b);
  EXPECT_EQ(bm_->num_evictable_blocks(), 1);
  expect_consistent({&a, &b});
}

TEST_F(BlockManagerTest, DisabledPrefixCachingNeverMatchesOrPublishes) {
  make(8, 2, /*prefix_caching=*/false);
  const std::vector<TokenId> p = {1, 2, 3, 4, 5};
  SequenceBlocks a;
  ASSERT_TRUE(bm_->allocate(a, 5));
  bm_->publish_full_blocks(a, p, 5);
  EXPECT_EQ(bm_->pool().num_cached_blocks(), 0);
  EXPECT_EQ(bm_->match_prefix(p, "").num_tokens, 0);
  bm_->free(a);
  EXPECT_EQ(bm_->num_evictable_blocks(), 0);
  expect_consistent({&a});
}

TEST_F(BlockManagerTest, ResetPrefixCacheKeepsBlocksInUse) {
  make(8, 2);
  const std::vector<TokenId> p = {1, 2, 3, 4};
  SequenceBlocks a, b;
  ASSERT_TRUE(bm_->allocate(a, 4));
  bm_->publish_full_blocks(a, p, 4);
  ASSERT_TRUE(bm_->allocate(b, 4, bm_->match_prefix(std::span(p).first(2), "")));
  bm_->free(a);  // A's second block becomes evictable; the first is still B's
  EXPECT_EQ(bm_->reset_prefix_cache(), 1);
  EXPECT_EQ(bm_->match_prefix(p, "").num_tokens, 2);
  expect_consistent({&a, &b});
}

TEST_F(BlockManagerTest, CountersRecordQueriesAndHits) {
  make(8, 2);
  bm_->record_prefix_lookup(10, 4);
  bm_->record_prefix_lookup(6, 0);
  EXPECT_EQ(bm_->prefix_cache_stats().num_queries, 2u);
  EXPECT_EQ(bm_->prefix_cache_stats().num_queried_tokens, 16u);
  EXPECT_EQ(bm_->prefix_cache_stats().num_hit_tokens, 4u);
}

// Random allocate / publish / free over sequences drawn from a few shared prefixes.
TEST_F(BlockManagerTest, RandomOperationsKeepInvariants) {
  make(24, 4);
  std::mt19937 rng(1234);
  struct Seq {
    std::vector<TokenId> tokens;
    SequenceBlocks blocks;
    int num_computed = 0;
  };
  std::vector<std::unique_ptr<Seq>> seqs;
  for (int iter = 0; iter < 4000; ++iter) {
    const int op = static_cast<int>(rng() % 4);
    if (op == 0 || seqs.empty()) {
      auto s = std::make_unique<Seq>();
      s->blocks = SequenceBlocks(rng() % 4 == 0 ? "other" : "");
      const int len = 1 + static_cast<int>(rng() % 20);
      const TokenId family = static_cast<TokenId>(rng() % 3);
      for (int i = 0; i < len; ++i) s->tokens.push_back(i < 9 ? family * 100 + i : static_cast<TokenId>(rng() % 50));
      const PrefixHit hit = bm_->match_prefix(std::span(s->tokens).first(s->tokens.size() - 1), s->blocks.salt());
      if (bm_->allocate(s->blocks, static_cast<int>(s->tokens.size()), hit)) {
        s->num_computed = hit.num_tokens;
        seqs.push_back(std::move(s));
      }
    } else {
      const size_t idx = rng() % seqs.size();
      Seq& s = *seqs[idx];
      if (op == 1 || op == 2) {  // compute every token so far, then grow by one
        s.num_computed = static_cast<int>(s.tokens.size());
        bm_->publish_full_blocks(s.blocks, s.tokens, s.num_computed);
        s.tokens.push_back(static_cast<TokenId>(rng() % 50));
        if (!bm_->allocate(s.blocks, static_cast<int>(s.tokens.size()))) s.tokens.pop_back();
      } else {
        bm_->free(s.blocks);
        seqs.erase(seqs.begin() + static_cast<ptrdiff_t>(idx));
      }
    }
    std::vector<const SequenceBlocks*> views;
    for (const auto& s : seqs) views.push_back(&s->blocks);
    ASSERT_EQ(bm_->check_invariants(views), "") << "iteration " << iter;
  }
}

}  // namespace
}  // namespace pagoda
